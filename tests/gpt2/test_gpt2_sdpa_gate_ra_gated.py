"""The SDPA output gate and gated RA together (attention "sdpa_gate_ra_gated"):
the original project's GPT2_KNLP_SDPA_GATE and GPT2_KNLP_RA both on, against
a written-out transcription of what its forward computes (knlp
gpt2/model_knlp.py at 041ec5f2), then causality, the cache, torch.compile and
the Kconfig side (run ids, the four-way matrix)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor

from gpt2.attention import CausalSelfAttention
from gpt2.config import GPT2Config
from gpt2.model import GPT2
from gpt2.ra import ReciprocalCache
from gpt2.ra_gated import GatedReciprocalAttention
from gpt2.sdpa_gate import OutputGatedAttention
from lib.config.kconfig import load_strict
from lib.config.run_config import run_config_from_defaults, write_outputs
from lib.matrix.grid import expand
from lib.train.naming import run_tag

VOCAB = 101
TINY = dict(vocab_size=VOCAB, block_size=32, n_layer=4, n_head=4, n_embd=32)
# Reverse layers 1 and 2 of 4 (the reference's middle band), the last two of
# four heads, an open RA gate (tanh 0.8 = 0.66) so the branch shows everywhere.
BOTH = dict(
    attention="sdpa_gate_ra_gated", ra_gated_layers=2, ra_gated_heads=2, ra_gated_gate_init=0.8
)


def sharp(seed: int = 0, std: float = 0.1, **overrides: Any) -> GPT2:
    """A model whose weights ~ N(0, std^2): at GPT-2's 0.02 the gates and the
    branch move the output by less than the tolerances below."""
    torch.manual_seed(seed)
    model = GPT2(GPT2Config(**{**TINY, **BOTH, **overrides})).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, std)
    return model


# ------------------------------------------------- the reference, written out


def causal_heads(q: Tensor, k: Tensor, v: Tensor) -> Tensor:
    """[B, H, T, D] each: row i = sum_{j<=i} softmax_j(q_i . k_j / sqrt(D)) v_j."""
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.size(-1))
    later = torch.ones(q.size(2), q.size(2), dtype=torch.bool).triu(1)
    return scores.masked_fill(later, float("-inf")).softmax(-1) @ v


def reference_logits(model: GPT2, idx: Tensor, gate_last: bool = False) -> Tensor:
    """Logits of the reference's GPT2_KNLP (use_sdpa_gate and use_ra on) with
    model's weights: per block x + attn(ln_1 x), then x + mlp(ln_2 x); in attn,
    y = merge(SDPA(q, k, v)) * sigmoid(gate(ln_1 x)) on every layer, then on
    the n_ra_layers centred at n_layer // 2, the last n_ra_heads heads'
    SDPA(k, q, v) projected, layer-normed and added times tanh(logit); c_proj.
    gate_last: the other order (the sigmoid gate after the branch joins)."""
    cfg = model.config
    first = cfg.n_layer // 2 - cfg.ra_gated_layers // 2
    reverse = set(range(first, first + cfg.ra_gated_layers))
    tr = model.transformer
    batch, seq = idx.shape
    x = tr.wte(idx) + tr.wpe(torch.arange(seq))
    for i, block in enumerate(tr.h):
        attn, h = block.attn, block.ln_1(x)
        q, k, v = (
            t.view(batch, seq, cfg.n_head, cfg.head_dim).transpose(1, 2)
            for t in attn.c_attn(h).split(cfg.n_embd, dim=2)
        )
        y = causal_heads(q, k, v).transpose(1, 2).reshape(batch, seq, cfg.n_embd)
        gate = torch.sigmoid(h @ attn.output_gate.weight.T + attn.output_gate.bias)
        y = y if gate_last else y * gate
        if i in reverse:
            last = slice(cfg.n_head - cfg.ra_gated_heads, cfg.n_head)
            r = causal_heads(k[:, last], q[:, last], v[:, last])  # keys ask, queries answer
            r = (
                r.transpose(1, 2).reshape(batch, seq, -1) @ attn.ra_proj.weight.T
                + attn.ra_proj.bias
            )
            r = F.layer_norm(r, (cfg.n_embd,), attn.ra_norm.weight, attn.ra_norm.bias, 1e-5)
            y = y + torch.tanh(attn.ra_gate) * r
        y = y * gate if gate_last else y
        x = x + attn.c_proj(y)
        x = x + block.mlp(block.ln_2(x))
    return tr.ln_f(x) @ tr.wte.weight.T


def test_model_matches_the_reference_with_both_switches_on() -> None:
    model = sharp(std=0.3).double()
    with torch.no_grad():  # a different RA gate per reverse layer, one of them negative
        model.transformer.h[1].attn.ra_gate.fill_(0.6)
        model.transformer.h[2].attn.ra_gate.fill_(-1.1)
    idx = torch.randint(0, VOCAB, (2, 19))
    with torch.no_grad():
        got, _ = model(idx, idx)
        want = reference_logits(model, idx)
    torch.testing.assert_close(got, want, rtol=0, atol=1e-10)
    # The order is what is being checked: gating the sum instead is far off.
    other = reference_logits(model, idx, gate_last=True)
    assert (other - want).abs().max().item() > 1e-3


def test_every_layer_is_gated_and_only_the_middle_ones_reverse() -> None:
    model = sharp()
    kinds = [type(b.attn) for b in model.transformer.h]
    assert kinds == [
        OutputGatedAttention,
        GatedReciprocalAttention,
        GatedReciprocalAttention,
        OutputGatedAttention,
    ]
    assert all(b.attn.output_gate.weight.shape == (32, 32) for b in model.transformer.h)
    plain = GPT2(GPT2Config(**TINY, attention="ra_gated", ra_gated_layers=2, ra_gated_heads=2))
    assert [type(b.attn) for b in plain.transformer.h][0] is CausalSelfAttention
    assert plain.transformer.h[1].attn.output_gate is None
    # 4 layers' gates (32 x 32 + 32) more than gated RA alone; the same cache
    extra = sum(p.numel() for p in model.parameters()) - sum(p.numel() for p in plain.parameters())
    assert extra == 4 * (32 * 32 + 32)
    assert model.cache_bytes_per_token() == plain.cache_bytes_per_token() == (4 * 64 + 2 * 16) * 4


def test_gate_zero_is_the_output_gated_model_exactly() -> None:
    gated = sharp(seed=1, attention="sdpa_gate")
    both = GPT2(GPT2Config(**{**TINY, **BOTH, "ra_gated_gate_init": 0.0})).eval()
    missing = both.load_state_dict(gated.state_dict(), strict=False).missing_keys
    assert missing and all(".attn.ra_" in k for k in missing)
    idx = torch.randint(0, VOCAB, (2, 24))
    assert torch.equal(both(idx, idx)[0], gated(idx, idx)[0])


# -------------------------------------------------------- causality, cache


@pytest.mark.parametrize("t", [0, 9, 18])
def test_no_logit_depends_on_a_later_token(t: int) -> None:
    model = sharp()
    idx = torch.randint(0, VOCAB, (2, 20))
    changed = idx.clone()
    changed[:, t + 1 :] = (
        idx[:, t + 1 :] + 1 + torch.randint(0, VOCAB - 1, idx[:, t + 1 :].shape)
    ) % VOCAB
    a, _ = model(idx, idx)
    b, _ = model(changed, changed)
    torch.testing.assert_close(a[:, : t + 1], b[:, : t + 1], rtol=0, atol=0)
    assert not torch.allclose(a[:, t + 1 :], b[:, t + 1 :])


def test_cached_steps_match_the_full_forward() -> None:
    model = sharp()
    idx = torch.randint(0, VOCAB, (2, 20))
    full, _ = model(idx, idx)
    caches = model.new_cache()
    # a prompt, single tokens, then a chunk of three after a non-empty cache
    pieces = [idx[:, :8]] + [idx[:, t : t + 1] for t in range(8, 17)] + [idx[:, 17:]]
    with torch.no_grad():
        stepped = torch.cat([model.forward_cached(p, caches) for p in pieces], dim=1)
    assert [type(c) is ReciprocalCache for c in caches] == [False, True, True, False]
    assert all(c.pos == 20 for c in caches)
    torch.testing.assert_close(stepped, full, rtol=0, atol=1e-5)


@pytest.mark.parametrize("new_tokens", [10, 40])  # 40 runs past the 32-token block
def test_greedy_generation_is_the_same_with_and_without_cache(new_tokens: int) -> None:
    model = sharp()
    prompt = torch.randint(0, VOCAB, (2, 5))
    cached = model.generate(prompt, new_tokens, temperature=0, use_cache=True)
    assert torch.equal(cached, model.generate(prompt, new_tokens, temperature=0, use_cache=False))


# ----------------------------------------------------------------- compile

# two layers, an output-gated one and a reverse one: half the tracing time
COMPILED = dict(n_layer=2, ra_gated_layers=1)


def test_traces_as_one_graph_forward_and_backward() -> None:
    # aot_eager traces the backward too, without inductor's code generation
    torch._dynamo.reset()
    model = sharp(**COMPILED).train()
    idx = torch.randint(0, VOCAB, (2, 16))
    eager_logits, eager_loss = model(idx, idx)
    eager_loss.backward()
    want = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    logits, loss = torch.compile(model, fullgraph=True, backend="aot_eager")(idx, idx)
    loss.backward()
    torch.testing.assert_close(logits, eager_logits, rtol=0, atol=1e-5)
    for got, expected in zip((p.grad for p in model.parameters()), want):
        torch.testing.assert_close(got, expected, rtol=0, atol=1e-5)


@pytest.mark.slow
def test_inductor_compiled_model_matches_eager() -> None:
    torch._dynamo.reset()
    model = sharp(**COMPILED)
    idx = torch.randint(0, VOCAB, (2, 16))
    eager, _ = model(idx, idx)
    got, _ = torch.compile(model, fullgraph=True)(idx, idx)
    torch.testing.assert_close(got, eager, rtol=0, atol=1e-4)


# ------------------------------------------------------------------ Kconfig


def test_the_choice_builds_the_combination_with_its_own_run_id() -> None:
    from gpt2 import from_run_config

    run = run_config_from_defaults(
        {
            "GPT2_ATTENTION_SDPA_GATE_RA_GATED": "y",
            "GPT2_RA_GATED_LAYERS": "1",
            "GPT2_RA_GATED_HEADS": "2",
        }
    )
    cfg = from_run_config(run, VOCAB)
    assert (cfg.attention, cfg.ra_gated_layers, cfg.ra_gated_heads) == ("sdpa_gate_ra_gated", 1, 2)
    assert run_tag(run).split("_")[2] == "sdpagateragated"


def test_four_way_matrix_is_the_references_ablation(tmp_path: Path) -> None:
    """knlp's KNLP_VARIANT baseline, sdpa_gate, ra, sdpa_ra as one matrix."""
    defconfig = tmp_path / "four"
    defconfig.write_text(
        "CONFIG_GPT2_ATTENTION_MULTIPLE=y\n"
        "CONFIG_GPT2_ATTENTION_ENABLE_SDPA_GATE=y\n"
        "CONFIG_GPT2_ATTENTION_ENABLE_RA_GATED=y\n"
        "CONFIG_GPT2_ATTENTION_ENABLE_SDPA_GATE_RA_GATED=y\n"
        "CONFIG_GPT2_RA_GATED_LAYERS=1\n"
    )
    write_outputs(load_strict(defconfig), tmp_path / ".config", tmp_path / "config.py")
    _, runs = expand([], tmp_path / ".config")
    assert [r.config.GPT2_ATTENTION for r in runs] == [
        "vanilla",
        "sdpa_gate",
        "ra_gated",
        "sdpa_gate_ra_gated",
    ]
    assert len({r.run_id for r in runs}) == 4
    assert runs[3].run_id.split("_")[2] == "sdpagateragated"
    assert all(r.config.GPT2_RA_GATED_LAYERS == 1 for r in runs[2:])
