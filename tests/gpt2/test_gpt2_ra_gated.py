"""Gated reciprocal attention, the SDPA output gate and the learned alpha,
against written-out definitions (knlp gpt2/model_knlp.py for the first two)."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch

from gpt2.attention import CausalSelfAttention, KVCache
from gpt2.config import GPT2Config
from gpt2.model import GPT2
from gpt2.ra import ReciprocalCache, reciprocal_attention
from gpt2.ra_gated import GatedReciprocalAttention, reverse_layers
from gpt2.sdpa_gate import OutputGatedAttention
from tests.gpt2.test_gpt2_ra_band import explicit_reciprocal

VOCAB = 101
TINY = dict(vocab_size=VOCAB, block_size=32, n_layer=2, n_head=4, n_embd=64)


def model(seed: int = 0, **overrides: Any) -> GPT2:
    torch.manual_seed(seed)
    return GPT2(GPT2Config(**{**TINY, **overrides})).eval()


def layer_config(**overrides: Any) -> GPT2Config:
    """One float64-friendly layer: 3 heads of width 4."""
    return GPT2Config(
        **{
            **dict(
                vocab_size=VOCAB,
                block_size=16,
                n_layer=2,
                n_head=3,
                n_embd=12,
                attention="ra_gated",
                ra_gated_layers=1,
                ra_gated_heads=2,
            ),
            **overrides,
        }
    )


def heads_by_loops(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Causal attention of [T, D] rows, one token at a time: row i is
    sum_{j<=i} softmax_j(q_i . k_j / sqrt(D)) v_j."""
    out = []
    for i in range(q.size(0)):
        logits = torch.stack([q[i] @ k[j] for j in range(i + 1)]) / math.sqrt(q.size(1))
        out.append(logits.softmax(0) @ v[: i + 1])
    return torch.stack(out)


# ---------------------------------------------------------- gated RA: placement


@pytest.mark.parametrize(
    ("n_layer", "count", "layers"),
    [
        (12, 3, [5, 6, 7]),  # the published run: middle three of GPT-2 small
        (12, 1, [6]),
        (12, 4, [4, 5, 6, 7]),
        (12, 12, list(range(12))),
        (4, 1, [2]),
        (4, 3, [1, 2, 3]),
        (2, 1, [1]),
        (5, 2, [1, 2]),
    ],
)
def test_reverse_layers_are_the_references_middle_band(
    n_layer: int, count: int, layers: list[int]
) -> None:
    # The reference: center = n_layer // 2, first = center - count // 2.
    cfg = GPT2Config(vocab_size=VOCAB, n_layer=n_layer, attention="ra_gated", ra_gated_layers=count)
    assert list(reverse_layers(cfg)) == layers


def test_only_reverse_layers_carry_the_branch_and_its_cache() -> None:
    m = model(attention="ra_gated", ra_gated_layers=1, ra_gated_heads=2)
    kinds = [type(b.attn) for b in m.transformer.h]
    assert kinds == [CausalSelfAttention, GatedReciprocalAttention]
    attn = m.transformer.h[1].attn
    assert attn.ra_proj.in_features == 2 * 16 and attn.ra_gate.item() == 0.0
    assert attn.ra_proj.weight.std().item() == pytest.approx(0.02, rel=0.1)  # not residual-scaled
    caches = m.new_cache()
    m.forward_cached(torch.randint(0, VOCAB, (2, 5)), caches)
    assert type(caches[0]) is KVCache and isinstance(caches[1], ReciprocalCache)
    assert caches[1].q.shape == (2, 2, 5, 16)  # the last 2 heads' queries
    # k and v of both layers (2 x 2 x 64) plus 2 reverse heads x 16, 4 bytes each.
    assert m.cache_bytes_per_token() == (2 * 2 * 64 + 2 * 16) * 4


# ------------------------------------------------------- gated RA: behaviour


def test_gate_zero_is_vanilla_attention_exactly() -> None:
    torch.manual_seed(3)
    vanilla = model(seed=1)
    gated = model(seed=2, attention="ra_gated", ra_gated_layers=2, ra_gated_heads=3)
    missing = gated.load_state_dict(vanilla.state_dict(), strict=False).missing_keys
    assert missing and all(".attn.ra_" in k for k in missing)
    idx = torch.randint(0, VOCAB, (2, 24))
    assert torch.equal(gated(idx, idx)[0], vanilla(idx, idx)[0])
    caches = gated.new_cache()
    stepped = torch.cat(
        [gated.forward_cached(idx[:, :12], caches), gated.forward_cached(idx[:, 12:], caches)],
        dim=1,
    )
    torch.testing.assert_close(stepped, vanilla(idx, idx)[0], rtol=0, atol=1e-5)
    with torch.no_grad():  # an open gate changes the output
        gated.transformer.h[0].attn.ra_gate.fill_(0.5)
    assert not torch.allclose(gated(idx, idx)[0], vanilla(idx, idx)[0])


def test_at_gate_zero_only_the_gate_gets_a_gradient() -> None:
    # d tanh(g) / dg = 1 at 0, while the branch is multiplied by tanh(0) = 0.
    m = model(attention="ra_gated", ra_gated_layers=1).train()
    idx = torch.randint(0, VOCAB, (2, 16))
    m(idx, idx)[1].backward()
    attn = m.transformer.h[1].attn
    assert attn.ra_gate.grad.abs().item() > 0
    assert torch.count_nonzero(attn.ra_proj.weight.grad) == 0


def test_reverse_branch_by_hand_two_tokens() -> None:
    """One head, D = 2: token 0 can only read itself; for token 1 the logits
    k_1 . q_j / sqrt(2) are ln 3 (j = 0) and 0 (j = 1): weights 3/4 and 1/4."""
    attn = GatedReciprocalAttention(layer_config())
    q = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    k = torch.tensor([[5.0, -2.0], [math.sqrt(2) * math.log(3), 0.0]])
    v = torch.tensor([[4.0, 0.0], [0.0, 8.0]])
    got = attn.reverse(k[None, None], q[None, None], v[None, None], n_past=0)[0, 0]
    torch.testing.assert_close(got, torch.tensor([[4.0, 0.0], [3.0, 2.0]]), rtol=0, atol=1e-6)


def test_gated_layer_against_the_written_out_definition() -> None:
    """y = c_proj(base + tanh(g) LN(W_r [R_h1; R_h2] + b_r)), R_h row i =
    sum_{j<=i} softmax_j(k_i . q_j / sqrt(d)) v_j over the last two heads."""
    torch.manual_seed(4)
    attn = GatedReciprocalAttention(layer_config(ra_gated_gate_init=0.7)).double().eval()
    with torch.no_grad():
        for p in attn.parameters():
            p.normal_(0.0, 0.5)
    x = torch.randn(1, 7, 12, dtype=torch.float64)
    q, k, v = attn.c_attn(x)[0].split(12, dim=1)
    per_head = [slice(4 * h, 4 * h + 4) for h in range(3)]
    base = torch.cat([heads_by_loops(q[:, s], k[:, s], v[:, s]) for s in per_head], dim=1)
    reverse = torch.cat([heads_by_loops(k[:, s], q[:, s], v[:, s]) for s in per_head[1:]], dim=1)
    branch = torch.nn.functional.layer_norm(
        attn.ra_proj(reverse), (12,), attn.ra_norm.weight, attn.ra_norm.bias, 1e-5
    )
    want = attn.c_proj(base + math.tanh(attn.ra_gate.item()) * branch)
    torch.testing.assert_close(attn(x)[0], want, rtol=0, atol=1e-12)


# -------------------------------------------------------- SDPA output gate


def test_output_gate_against_the_written_out_definition() -> None:
    """y = c_proj(heads(x) * sigmoid(W_g x + b_g)), elementwise."""
    torch.manual_seed(5)
    attn = OutputGatedAttention(layer_config(attention="sdpa_gate")).double().eval()
    with torch.no_grad():
        for p in attn.parameters():
            p.normal_(0.0, 0.5)
    x = torch.randn(1, 6, 12, dtype=torch.float64)
    q, k, v = attn.c_attn(x)[0].split(12, dim=1)
    heads = torch.cat(
        [
            heads_by_loops(q[:, s], k[:, s], v[:, s])
            for s in (slice(0, 4), slice(4, 8), slice(8, 12))
        ],
        dim=1,
    )
    gate = 1 / (1 + torch.exp(-(x[0] @ attn.output_gate.weight.T + attn.output_gate.bias)))
    want = heads * gate @ attn.c_proj.weight.T + attn.c_proj.bias
    torch.testing.assert_close(attn(x)[0], want, rtol=0, atol=1e-12)


def test_output_gate_starts_near_one_half() -> None:
    # N(0, 0.02) weights and a zero bias, as every Linear: the gate's input is
    # a unit-scale LayerNorm output, so its logits have std 0.02 sqrt(64) = 0.16.
    m = model(attention="sdpa_gate")
    gate = m.transformer.h[0].attn.output_gate
    x = m.transformer.h[0].ln_1(m.transformer.wte(torch.randint(0, VOCAB, (4, 32))))
    values = torch.sigmoid(gate(x))
    assert abs(values.mean().item() - 0.5) < 0.01
    assert 0.3 < values.min().item() and values.max().item() < 0.7


# ------------------------------------------------------------ learned alpha


@pytest.mark.parametrize("window", [0, 3])
def test_per_head_alpha_matches_the_definition(window: int) -> None:
    gen = torch.Generator().manual_seed(6)
    q, k, v = (torch.randn(2, 4, 11, 8, generator=gen, dtype=torch.float64) for _ in range(3))
    alpha = torch.tensor([0.1, -0.4, 0.0, 1.7], dtype=torch.float64).view(4, 1, 1)
    got = reciprocal_attention(q, k, v, q, 0, alpha, window)
    want = explicit_reciprocal(q, k, v, q, 0, alpha, window or 11)
    torch.testing.assert_close(got, want, rtol=0, atol=1e-12)


@pytest.mark.parametrize("attention", ["ra_logit", "ra_mla"])
def test_learned_alpha_starts_as_the_fixed_one_and_learns_per_head(attention: str) -> None:
    options = dict(attention=attention, ra_alpha=0.4, latent_dim=16)
    fixed = model(seed=8, **options)
    learned = model(seed=9, **options, ra_alpha_learned=True)
    learned.load_state_dict(fixed.state_dict(), strict=False)
    alpha = learned.transformer.h[0].attn.ra_alpha
    assert alpha.shape == (4,) and torch.equal(alpha.detach(), torch.full((4,), 0.4))
    idx = torch.randint(0, VOCAB, (2, 20))
    torch.testing.assert_close(learned(idx, idx)[0], fixed(idx, idx)[0], rtol=0, atol=1e-6)
    learned(idx, idx)[1].backward()
    assert torch.unique(alpha.grad).numel() == 4  # one gradient per head
    no_decay = learned.param_groups(0.1)[1]["names"]
    assert "transformer.h.0.attn.ra_alpha" in no_decay


def test_learned_alpha_from_zero_still_runs_the_reciprocal_term() -> None:
    m = model(attention="ra_logit", ra_alpha=0.0, ra_alpha_learned=True)
    assert isinstance(m.new_cache()[0], ReciprocalCache)
    idx = torch.randint(0, VOCAB, (2, 16))
    m(idx, idx)[1].backward()
    assert m.transformer.h[0].attn.ra_alpha.grad.abs().sum().item() > 0


# ----------------------------------------------------------------- compile

COMPILED = {
    "ra_gated": dict(
        attention="ra_gated", ra_gated_layers=2, ra_gated_heads=2, ra_gated_gate_init=0.8
    ),
    "sdpa_gate": dict(attention="sdpa_gate"),
    "ra_learned_window3": dict(
        attention="ra_logit", ra_alpha=0.3, ra_alpha_learned=True, ra_window=3
    ),
}


@pytest.mark.parametrize("name", COMPILED)
def test_new_variants_trace_as_one_graph_forward_and_backward(name: str) -> None:
    # fullgraph=True fails on any graph break; aot_eager also traces the
    # backward, without inductor's code generation (which takes ~10 s a model
    # here, and is what test_every_variant_compiles_and_matches_eager runs).
    torch._dynamo.reset()
    m = model(**COMPILED[name]).train()
    idx = torch.randint(0, VOCAB, (2, 16))
    eager_logits, eager_loss = m(idx, idx)
    eager_loss.backward()
    want = [p.grad.clone() for p in m.parameters()]
    m.zero_grad()
    logits, loss = torch.compile(m, fullgraph=True, backend="aot_eager")(idx, idx)
    loss.backward()
    torch.testing.assert_close(logits, eager_logits, rtol=0, atol=1e-5)
    for got, expected in zip((p.grad for p in m.parameters()), want):
        torch.testing.assert_close(got, expected, rtol=0, atol=1e-5)
