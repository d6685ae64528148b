"""knlp's own MLA family (gpt2/kvsplice.py) against a written-out float64
transcription of what the original project's GPT2_MLA, GPT2_MLA_KV and
GPT2_MLA_KV_FIM compute (knlp gpt2/mla.py at 041ec5f2); then its init, its
causality and cache, its cache sizes and FLOPs, that it learns, and
torch.compile (its settings and pruning: test_gpt2_kvsplice_config.py)."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.nn.functional as F

from gpt2.config import GPT2Config
from gpt2.model import GPT2, cache_elements_per_token
from tests.stochastic import observe

VOCAB = 61
VARIANTS = ("knlp_mla", "knlp_mla_kv", "knlp_mla_kv_fim")
# fim: layers 0, 1 are MLA layers, layer 2 a KVSplice layer
SMALL = dict(
    vocab_size=VOCAB,
    block_size=32,
    n_layer=3,
    n_head=2,
    n_embd=16,
    gelu="exact",  # knlp's MLP: nn.GELU()
    knlp_mla_latent=16,
    kvsplice_ratio=0.5,
    kvsplice_layers=1,
)


def model(attention: str, seed: int = 0, dtype=torch.float64, **overrides: Any) -> GPT2:
    """Every parameter random (biases and gains too), so no term hides."""
    torch.manual_seed(seed)
    m = GPT2(GPT2Config(**{**SMALL, "attention": attention, **overrides})).to(dtype)
    with torch.no_grad():
        for p in m.parameters():
            p.normal_(0.0, 0.3)
    return m.eval()


def tokens(seed: int = 1, batch: int = 2, seq: int = 20) -> torch.Tensor:
    return torch.randint(0, VOCAB, (batch, seq), generator=torch.Generator().manual_seed(seed))


def all_logits(m: GPT2, idx: torch.Tensor) -> torch.Tensor:
    """Every position's logits (forward without targets returns the last only)."""
    return m.lm_head(m.hidden_states(idx))


# ---------------------------------------------------- knlp, written out


def rope_knlp(x, dim):
    """knlp's RotaryEmbedding + apply_rope on x [..., T, dim]: frequencies
    1 / 10000^(2i/dim), the cos/sin table duplicated to dim, x * cos +
    rotate_half(x) * sin with rotate_half(x) = [-x2, x1]."""
    inv_freq = 1.0 / (10000.0 ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
    angles = torch.outer(torch.arange(x.size(-2), dtype=torch.float64), inv_freq)
    cos = torch.cat([angles.cos(), angles.cos()], dim=-1)
    sin = torch.cat([angles.sin(), angles.sin()], dim=-1)
    first, second = x.chunk(2, dim=-1)
    return x * cos + torch.cat([-second, first], dim=-1) * sin


def causal_softmax_attention(q, k, v):
    """Explicit scores / sqrt(d), the future masked, softmax, times v."""
    T = q.size(-2)
    scores = q @ k.transpose(-2, -1) / q.size(-1) ** 0.5
    future = torch.ones(T, T, dtype=torch.bool).triu(1)
    return scores.masked_fill(future, float("-inf")).softmax(dim=-1) @ v


def lin(x, weight, bias=None):
    out = x @ weight.T
    return out if bias is None else out + bias


def mla_flash_knlp(p, pre, x, heads):
    """knlp's MLA_Flash with cache None."""
    B, T, C = x.shape
    d = C // heads
    q = lin(x, p[pre + "W_q.weight"], p[pre + "W_q.bias"])
    q = q.view(B, T, heads, d).permute(0, 2, 1, 3)
    latent = lin(x, p[pre + "to_kv_latent.weight"], p[pre + "to_kv_latent.bias"])
    kv = lin(latent, p[pre + "from_kv_latent.weight"], p[pre + "from_kv_latent.bias"])
    kv = kv.view(B, T, 2, heads, d).permute(2, 0, 3, 1, 4)
    q, k = rope_knlp(q, d), rope_knlp(kv[0], d)
    out = causal_softmax_attention(q, k, kv[1]).transpose(1, 2).reshape(B, T, C)
    return lin(out, p[pre + "out_proj.weight"], p[pre + "out_proj.bias"])


def kvsplice_knlp(p, pre, x):
    """knlp's MLA_KVSplice, use_compressed_attn, cache None."""
    encoder = p[pre + "to_kv_latent.weight"]
    latent = lin(x, encoder)
    compressed = lin(latent, p[pre + "kvsplice.compress.weight"])
    dc = compressed.size(-1)
    compressed = F.layer_norm(
        compressed,
        (dc,),
        p[pre + "kvsplice.latent_ln.weight"],
        p[pre + "kvsplice.latent_ln.bias"],
        1e-5,
    )
    q = lin(compressed, p[pre + "q_proj_compressed.weight"])
    k, v = lin(compressed, p[pre + "kv_proj_compressed.weight"]).split(dc, dim=-1)
    q, k, v = q.unsqueeze(1), k.unsqueeze(1), v.unsqueeze(1)
    q, k = rope_knlp(q, dc), rope_knlp(k, dc)
    z = lin(causal_softmax_attention(q, k, v).squeeze(1), p[pre + "comp2lat.weight"])
    return z @ encoder + lin(z, p[pre + "out_residual.weight"], p[pre + "out_residual.bias"])


def knlp_logits(m: GPT2, idx):
    """knlp's GPT2_MLA* forward: wte + wpe, pre-LN blocks, MLP Linear-GELU-Linear,
    ln_f, the tied head; a KVSplice layer where the module has one."""
    p = dict(m.named_parameters())
    cfg = m.config
    B, T = idx.shape

    def ln(x, name):
        return F.layer_norm(x, (cfg.n_embd,), p[name + ".weight"], p[name + ".bias"], 1e-5)

    x = p["transformer.wte.weight"][idx] + p["transformer.wpe.weight"][:T]
    for i in range(cfg.n_layer):
        pre = f"transformer.h.{i}."
        h = ln(x, pre + "ln_1")
        if pre + "attn.kvsplice.compress.weight" in p:
            x = x + kvsplice_knlp(p, pre + "attn.", h)
        else:
            x = x + mla_flash_knlp(p, pre + "attn.", h, cfg.n_head)
        h = ln(x, pre + "ln_2")
        h = F.gelu(lin(h, p[pre + "mlp.c_fc.weight"], p[pre + "mlp.c_fc.bias"]))
        x = x + lin(h, p[pre + "mlp.c_proj.weight"], p[pre + "mlp.c_proj.bias"])
    return ln(x, "transformer.ln_f") @ p["transformer.wte.weight"].T


@pytest.mark.parametrize("attention", VARIANTS)
def test_logits_and_gradients_match_the_knlp_transcription(attention):
    m = model(attention)
    kinds = [type(b.attn).__name__ for b in m.transformer.h]
    expected_kinds = {
        "knlp_mla": ["KnlpMLAttention"] * 3,
        "knlp_mla_kv": ["KVSpliceAttention"] * 3,
        "knlp_mla_kv_fim": ["KnlpMLAttention"] * 2 + ["KVSpliceAttention"],
    }[attention]
    assert kinds == expected_kinds
    idx, targets = tokens(1), tokens(2)
    logits, loss = m(idx, targets)
    expected = knlp_logits(m, idx)
    assert torch.allclose(logits, expected, rtol=0, atol=1e-10), (logits - expected).abs().max()
    ref_loss = F.cross_entropy(expected.view(-1, VOCAB), targets.view(-1))
    assert loss is not None and abs(loss.item() - ref_loss.item()) < 1e-10
    params = [p for _, p in m.named_parameters()]
    ours = torch.autograd.grad(loss, params)
    theirs = torch.autograd.grad(ref_loss, params)
    for (name, _), a, b in zip(m.named_parameters(), ours, theirs):
        assert torch.allclose(a, b, rtol=0, atol=1e-10), name
    assert max(g.abs().max().item() for g in ours) > 1e-3  # the gradients are not all zero


def test_the_transcription_tells_mla_and_kvsplice_layers_apart():
    """The reference is sensitive: a model with one number changed no longer matches."""
    m = model("knlp_mla_kv")
    idx = tokens(1)
    with torch.no_grad():
        m.transformer.h[1].attn.out_residual.bias[0] += 1e-6
        moved = knlp_logits(m, idx)
        m.transformer.h[1].attn.out_residual.bias[0] -= 1e-6
        assert (moved - all_logits(m, idx)).abs().max() > 1e-9


# --------------------------------------------------------------- init


def fresh(attention: str, **overrides: Any) -> GPT2:
    torch.manual_seed(0)
    cfg = dict(SMALL, n_layer=4, n_embd=128, n_head=4, knlp_mla_latent=64, kvsplice_layers=2)
    return GPT2(GPT2Config(**{**cfg, "attention": attention, **overrides}))


@pytest.mark.parametrize("attention", VARIANTS)
def test_init_is_knlps_plain_normal_without_scaled_projections(attention):
    m = fresh(attention)
    for block in m.transformer.h:
        assert block.mlp.c_proj.weight.std().item() == pytest.approx(0.02, rel=0.03)
        for name, module in block.attn.named_modules():
            if isinstance(module, torch.nn.Linear):
                assert module.weight.std().item() == pytest.approx(0.02, rel=0.1), name
                if module.bias is not None:
                    assert not module.bias.any(), name
        if hasattr(block.attn, "out_residual"):  # knlp zeroes it, then its init redraws it
            assert block.attn.out_residual.weight.std().item() == pytest.approx(0.02, rel=0.1)
            assert torch.equal(block.attn.kvsplice.latent_ln.weight, torch.ones(32))
            assert not block.attn.kvsplice.latent_ln.bias.any()


def test_vanilla_keeps_its_scaled_residual_init():
    m = fresh("vanilla")
    scaled = 0.02 / (2 * 4) ** 0.5
    for block in m.transformer.h:
        assert block.mlp.c_proj.weight.std().item() == pytest.approx(scaled, rel=0.03)
        assert block.attn.c_proj.weight.std().item() == pytest.approx(scaled, rel=0.05)


# ------------------------------------------------- causality and cache


@pytest.mark.parametrize("attention", VARIANTS)
def test_later_tokens_do_not_change_earlier_logits(attention):
    m = model(attention)
    idx = tokens(1)
    changed = idx.clone()
    changed[:, 12] = (changed[:, 12] + 1) % VOCAB
    a, b = all_logits(m, idx), all_logits(m, changed)
    assert torch.allclose(a[:, :12], b[:, :12], rtol=0, atol=1e-12)
    assert (a[:, 12:] - b[:, 12:]).abs().max() > 1e-3


@pytest.mark.parametrize("attention", VARIANTS)
def test_cached_generation_equals_the_full_forward(attention):
    m = model(attention)
    idx = tokens(3, seq=16)
    full = all_logits(m, idx)
    caches = m.new_cache()
    # a prompt, then one token at a time, then a chunk of several after the cache
    parts = [m.forward_cached(idx[:, :5], caches)]
    parts += [m.forward_cached(idx[:, t : t + 1], caches) for t in range(5, 9)]
    parts.append(m.forward_cached(idx[:, 9:], caches))
    cached = torch.cat(parts, dim=1)
    assert torch.allclose(cached, full, rtol=0, atol=1e-10), (cached - full).abs().max()
    assert [c.pos for c in caches] == [16] * 3


@pytest.mark.parametrize("attention", VARIANTS)
def test_greedy_generation_with_and_without_the_cache_agree(attention):
    m = model(attention, dtype=torch.float32)
    prompt = tokens(4, seq=6)
    cached = m.generate(prompt, 10, temperature=0)
    plain = m.generate(prompt, 10, temperature=0, use_cache=False)
    assert torch.equal(cached, plain)


@pytest.mark.parametrize(
    "attention, widths",
    [
        ("knlp_mla", [256] * 12),
        ("knlp_mla_kv", [128] * 12),
        ("knlp_mla_kv_fim", [256] * 8 + [128] * 4),
    ],
)
def test_cache_per_token_with_knlps_defaults(attention, widths):
    """GPT-2 124M's shape with knlp's defaults (latent 256, ratio 0.5, 4 layers):
    what the cache holds after a forward, and what the model reports."""
    cfg = GPT2Config(vocab_size=VOCAB, block_size=16, attention=attention)
    with torch.device("meta"):
        meta = GPT2(cfg)
    assert meta.cache_bytes_per_token() == 4 * sum(widths)
    assert cache_elements_per_token(cfg) == sum(widths)
    small = GPT2(GPT2Config(**{**cfg.__dict__, "n_embd": 48, "n_head": 12})).eval()
    caches = small.new_cache()
    small.forward_cached(tokens(5, batch=1, seq=3), caches)
    assert [c.rows.shape[-1] for c in caches] == widths


def test_flops_count_one_head_of_d_comp_for_kvsplice_layers():
    cfg = dict(SMALL, n_layer=3)
    mla, kv = model("knlp_mla", **cfg), model("knlp_mla_kv", **cfg)
    fim = model("knlp_mla_kv_fim", **cfg)
    T = 32
    attention = {
        n: m.flops_per_token(T) - 6 * m.num_params()
        for n, m in [("mla", mla), ("kv", kv), ("fim", fim)]
    }
    assert attention == {
        "mla": 6 * T * 3 * 2 * 16,  # per layer n_head * (head_dim + head_dim) = 2 n_embd
        "kv": 6 * T * 3 * 2 * 8,  # one head, d_comp = int(16 * 0.5) = 8, for q.k and for v
        "fim": 6 * T * (2 * 2 * 16 + 2 * 8),
    }


# ------------------------------------------------------------ training


@pytest.mark.stochastic
@pytest.mark.parametrize("attention", VARIANTS)
def test_loss_falls_on_a_repeating_sequence(attention, seed):
    torch.manual_seed(seed)
    m = GPT2(GPT2Config(**{**SMALL, "attention": attention, "n_embd": 32}))
    pattern = torch.arange(8).repeat(5)[:33]
    x, y = pattern[:-1].unsqueeze(0).repeat(4, 1), pattern[1:].unsqueeze(0).repeat(4, 1)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-2)
    losses = []
    for _ in range(30):
        _, loss = m(x, y)
        assert loss is not None
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    # Spread over seeds 0-7 at one thread (AVX-512, AVX2 kernels) and 0-2 at 2 and 4: 0.005-0.012.
    assert observe("last / first loss", losses[-1] / losses[0]) < 0.3, losses


@pytest.mark.slow
def test_torch_compile_gives_the_eager_logits():
    m = model("knlp_mla_kv", dtype=torch.float32)
    idx = tokens(6)
    eager = m(idx, idx)[0]
    compiled = torch.compile(m)(idx, idx)[0]
    assert torch.allclose(compiled, eager, rtol=1e-4, atol=1e-4)
