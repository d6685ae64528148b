"""RGSA (gpt2/rgsa.py) against a written-out transcription of what the
original project's GPT2_RGSA computes (knlp gpt2/rgsa.py at 041ec5f2): dense
causal attention, with each layer's chunk routing beside it; then the
ablations, the chunk schedule, causality, the cache, torch.compile and the
Kconfig symbols."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch
import torch.nn.functional as F

from gpt2.config import GPT2Config
from gpt2.model import GPT2
from gpt2.rgsa import chunk_size

VOCAB = 53
# 96 tokens > window 64 + chunk 16: every layer routes over 6 chunks
SMALL = dict(
    vocab_size=VOCAB,
    block_size=96,
    n_layer=2,
    n_head=2,
    n_embd=16,
    attention="rgsa",
    gelu="exact",  # knlp's MLP: nn.GELU()
    rgsa_chunk_size=16,
    rgsa_routing_dim=8,
    rgsa_top_b=3,
    rgsa_local_window=64,
)


def model(seed: int = 0, dtype=torch.float64, **overrides: Any) -> GPT2:
    """Every parameter random (biases and gains too), so no term hides."""
    torch.manual_seed(seed)
    m = GPT2(GPT2Config(**{**SMALL, **overrides})).to(dtype)
    with torch.no_grad():
        for p in m.parameters():
            p.normal_(0.0, 0.3)
    return m.eval()


def tokens(seed: int = 1, batch: int = 2, seq: int = 96) -> torch.Tensor:
    return torch.randint(0, VOCAB, (batch, seq), generator=torch.Generator().manual_seed(seed))


def linear(x, layer):
    return x @ layer.weight.T + layer.bias


def knlp_routing(h, chunk_proj, query_proj, cs, top_b, stride=0, chunks=None):
    """knlp's ChunkRouter then RetrievalGate on a layer input h [B, T, C]:
    zero-pad to whole chunks, mean each, project; project the queries
    (mean-pooled in blocks of `stride` when 0 < stride < T), cosine scores,
    top-b. Returns (indices, scores, chunk embeddings)."""
    B, T, C = h.shape
    if chunks is None:
        padded = F.pad(h, (0, 0, 0, (cs - T % cs) % cs))
        chunks = linear(padded.view(B, -1, cs, C).mean(dim=2), chunk_proj)
    q = linear(h, query_proj)
    if 0 < stride < T:
        q = F.pad(q, (0, 0, 0, (stride - T % stride) % stride))
        q = q.view(B, -1, stride, q.size(-1)).mean(dim=2)
    scores = F.normalize(q, dim=-1) @ F.normalize(chunks, dim=-1).transpose(1, 2)
    picked = scores.topk(min(top_b, chunks.size(1)), dim=-1).indices
    if 0 < stride < T:
        picked = picked.repeat_interleave(stride, dim=1)[:, :T]
        scores = scores.repeat_interleave(stride, dim=1)[:, :T]
    return picked, scores, chunks


def knlp_forward(m: GPT2, idx: torch.Tensor, stride: int = 0, cache_every: int = 0):
    """GPT2_RGSA.forward written out: logits of every position and each
    layer's routing. Attention is dense causal softmax(q k^T / sqrt(d)) v."""
    cfg, t = m.config, m.transformer
    B, T = idx.shape
    H, D = cfg.n_head, cfg.head_dim
    x = t.wte.weight[idx] + t.wpe.weight[:T]
    router = t.h[0].attn.chunk_router.proj
    routes, chunks = [], None
    for i, block in enumerate(t.h):
        h = F.layer_norm(x, (cfg.n_embd,), block.ln_1.weight, block.ln_1.bias, 1e-5)
        q, k, v = linear(h, block.attn.c_attn).split(cfg.n_embd, dim=2)
        q, k, v = (z.view(B, T, H, D).transpose(1, 2) for z in (q, k, v))
        scores = q @ k.transpose(-1, -2) / math.sqrt(D)
        scores = scores.masked_fill(torch.ones(T, T).triu(1).bool(), float("-inf"))
        y = (scores.softmax(dim=-1) @ v).transpose(1, 2).reshape(B, T, cfg.n_embd)
        reuse = cache_every and i % cache_every and chunks is not None
        picked, rs, chunks = knlp_routing(
            h,
            router,
            block.attn.retrieval_gate.query_proj,
            cfg.rgsa_chunk_size,
            cfg.rgsa_top_b,
            stride,
            chunks if reuse else None,
        )
        routes.append((picked, rs))
        x = x + linear(y, block.attn.c_proj)
        h = F.layer_norm(x, (cfg.n_embd,), block.ln_2.weight, block.ln_2.bias, 1e-5)
        x = x + linear(F.gelu(linear(h, block.mlp.c_fc)), block.mlp.c_proj)
    x = F.layer_norm(x, (cfg.n_embd,), t.ln_f.weight, t.ln_f.bias, 1e-5)
    return x @ t.wte.weight.T, routes


def test_forward_gradient_and_routing_match_the_reference() -> None:
    m, idx = model(), tokens(seq=90)  # the last of 6 chunks zero-padded
    want_logits, want_routes = knlp_forward(m, idx)
    logits, loss = m(idx, idx)
    torch.testing.assert_close(logits, want_logits, rtol=0, atol=1e-10)
    for block, (picked, scores) in zip(m.transformer.h, want_routes):
        got_picked, got_scores, chunk = block.attn.routing
        assert chunk == 16 and got_picked.shape == (2, 90, 3)
        assert torch.equal(got_picked, picked)
        torch.testing.assert_close(got_scores, scores, rtol=0, atol=1e-12)
    params = [m.transformer.h[0].attn.c_attn.weight, m.transformer.wte.weight]
    want_loss = F.cross_entropy(want_logits.reshape(-1, VOCAB), idx.reshape(-1))
    want = torch.autograd.grad(want_loss, params)
    got = torch.autograd.grad(loss, params)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=0, atol=1e-10)


def test_strided_and_layer_cached_routing_match_the_reference() -> None:
    m = model(n_layer=3, rgsa_route_stride=10, rgsa_cache_routing_layers=2)
    idx = tokens()
    _, want = knlp_forward(m, idx, stride=10, cache_every=2)
    m(idx, idx)
    for block, (picked, scores) in zip(m.transformer.h, want):
        assert torch.equal(block.attn.routing[0], picked)
        torch.testing.assert_close(block.attn.routing[1], scores, rtol=0, atol=1e-12)
    # blocks of 10 queries share their choice; layer 1 scored layer 0's chunks
    assert torch.equal(want[0][0][:, 10:20], want[0][0][:, 10:11].expand(-1, 10, -1))


def test_the_router_never_trains_and_the_output_is_vanillas() -> None:
    """As in the reference, the routing never reaches the loss: the router's
    parameters get no gradient (frozen here), and the logits are those of
    vanilla attention with the same weights."""
    m, idx = model(), tokens()
    m.train()
    _, loss = m(idx, idx)
    loss.backward()
    router = [n for n, p in m.named_parameters() if "router" in n or "retrieval_gate" in n]
    assert len(router) == 2 + 2 * 2  # one shared chunk router, a query projection per layer
    assert all(
        p.grad is None and not p.requires_grad for n, p in m.named_parameters() if n in router
    )
    vanilla = GPT2(GPT2Config(**{**SMALL, "attention": "vanilla"})).to(torch.float64).eval()
    missing = vanilla.load_state_dict(m.state_dict(), strict=False)
    assert sorted(missing.unexpected_keys) == sorted(router)
    m.eval()
    torch.testing.assert_close(vanilla(idx, idx)[0], m(idx, idx)[0], rtol=0, atol=0)


def test_dense_mode_keeps_the_router_but_never_routes_and_random_routing_draws() -> None:
    idx = tokens()
    learned = model()
    dense = model(rgsa_routing="dense")
    assert learned.num_params() == dense.num_params()
    assert torch.equal(dense(idx, idx)[0], learned(idx, idx)[0])
    assert all(b.attn.routing is None for b in dense.transformer.h) and dense.aux_metrics() == {}
    rand = model(rgsa_routing="random")
    torch.manual_seed(5)
    rand(idx, idx)
    first = rand.transformer.h[0].attn.routing[0]
    assert first.shape == (2, 96, 3) and 0 <= first.min() and first.max() < 6
    torch.manual_seed(6)
    rand(idx, idx)
    assert not torch.equal(rand.transformer.h[0].attn.routing[0], first)
    assert not torch.equal(first, learned.transformer.h[0].attn.routing[0])


def test_short_sequences_do_not_route() -> None:
    m = model()
    m(tokens(seq=80), tokens(seq=80))  # 80 <= 64 + 16
    assert m.transformer.h[0].attn.routing is None and m.aux_metrics() == {}


def test_routing_metrics_are_the_references_load_balance_and_entropy() -> None:
    m, idx = model(), tokens()
    m(idx, idx)
    picked, scores, _ = m.transformer.h[0].attn.routing
    probs = scores.softmax(dim=-1)
    entropy = float(-(probs * probs.log()).sum(-1).mean()) / math.log(6)
    counts = torch.bincount(picked.reshape(-1), minlength=6).double()
    share = counts / counts.sum()
    metrics = m.aux_metrics()
    assert metrics["rgsa_entropy"] == pytest.approx(entropy, rel=1e-6)
    assert metrics["rgsa_balance"] == pytest.approx(max(0.0, 1 - float(share.std() / share.mean())))
    assert metrics["rgsa_chunk"] == 16.0 and 0 < metrics["rgsa_balance"] < 1


def knlp_chunk_size(T, dynamic, fixed, low, high, alpha, schedule, spec, rounding):
    """knlp's compute_chunk_size with its rounding helpers, written out."""
    if not dynamic:
        return fixed
    if schedule == "power":
        cs = max(low, min(int(round(T**alpha)), high))
    else:
        cs = high
        for entry in spec.split(","):
            if ":" in entry and T <= int(entry.split(":")[0]):
                cs = int(entry.split(":")[1])
                break
        cs = max(low, min(cs, high))
    if rounding == "pow2" and cs > 1:
        lo, hi = 1 << (cs - 1).bit_length() - 1, 1 << (cs - 1).bit_length()
        cs = lo if (cs - lo) <= (hi - cs) else hi
    elif rounding == "multiple_of_8":
        cs = max(8, round(cs / 8) * 8)
    return max(1, cs)


@pytest.mark.parametrize("rounding", ["pow2", "multiple_of_8", "nearest"])
@pytest.mark.parametrize(
    "schedule, alpha, spec, low, high",
    [
        ("power", 0.5, "", 32, 256),
        ("power", 0.6, "", 8, 1024),
        ("piecewise", 0.5, "512:32,2048:64,8192:128", 32, 128),
        ("piecewise", 0.5, "100:20,300:44", 8, 60),
        ("piecewise", 0.5, "", 16, 100),
    ],
)
def test_dynamic_chunk_size_follows_the_references_schedule(
    schedule, alpha, spec, low, high, rounding
) -> None:
    cfg = GPT2Config(
        **{**SMALL, "block_size": 4096},
        rgsa_dynamic_chunking=True,
        rgsa_chunk_schedule=schedule,
        rgsa_chunk_size_alpha=alpha,
        rgsa_chunk_piecewise=spec,
        rgsa_chunk_size_min=low,
        rgsa_chunk_size_max=high,
        rgsa_chunk_rounding=rounding,
    )
    args = (True, 64, low, high, alpha, schedule, spec, rounding)
    got = [chunk_size(T, cfg) for T in range(1, 4097)]
    assert got == [knlp_chunk_size(T, *args) for T in range(1, 4097)]
    assert chunk_size(1000, GPT2Config(**SMALL)) == 16  # fixed without dynamic chunking


def test_changing_a_later_token_leaves_earlier_logits_unchanged() -> None:
    m, idx = model(), tokens()
    later = idx.clone()
    later[:, 90] = (later[:, 90] + 1) % VOCAB
    a, b = m(idx, idx)[0], m(later, later)[0]
    torch.testing.assert_close(a[:, :90], b[:, :90], rtol=0, atol=0)
    assert not torch.allclose(a[:, 90:], b[:, 90:])


def test_cached_generation_agrees_with_the_full_forward() -> None:
    m, idx = model(), tokens(batch=1)
    full = m(idx, idx)[0]
    caches = m.new_cache()
    steps = [m.forward_cached(idx[:, :70], caches)]
    steps += [m.forward_cached(idx[:, t : t + 1], caches) for t in range(70, 96)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, rtol=0, atol=1e-10)
    prompt = idx[:, :40]
    cached = m.generate(prompt, 50, temperature=0)
    assert torch.equal(cached, m.generate(prompt, 50, temperature=0, use_cache=False))


def test_traces_as_one_graph_and_matches_eager() -> None:
    torch._dynamo.reset()
    m = model(dtype=torch.float32).train()
    idx = tokens()
    eager, _ = m(idx, idx)
    want = m.aux_metrics()
    compiled = torch.compile(m, fullgraph=True, backend="aot_eager")
    got, loss = compiled(idx, idx)
    loss.backward()
    torch.testing.assert_close(got, eager, rtol=0, atol=1e-5)
    assert m.aux_metrics() == pytest.approx(want, rel=1e-5)


@pytest.mark.slow
def test_inductor_compiled_model_matches_eager() -> None:
    torch._dynamo.reset()
    m = model(dtype=torch.float32)
    idx = tokens()
    eager, _ = m(idx, idx)
    got, _ = torch.compile(m, fullgraph=True)(idx, idx)
    torch.testing.assert_close(got, eager, rtol=0, atol=1e-4)
    assert m.aux_metrics()["rgsa_chunk"] == 16.0


def test_the_choice_and_its_symbols_build_the_configured_model() -> None:
    from gpt2 import from_run_config, variant
    from lib.config.run_config import run_config_from_defaults

    run = run_config_from_defaults(
        {
            "GPT2_ATTENTION_RGSA": "y",
            "GPT2_RGSA_TOP_B": "4",
            "GPT2_RGSA_ROUTING_RANDOM": "y",
            "GPT2_RGSA_DYNAMIC_CHUNKING": "y",
            "GPT2_RGSA_CHUNK_SCHEDULE_PIECEWISE": "y",
            "GPT2_RGSA_CHUNK_PIECEWISE": "64:16",
            "GPT2_RGSA_CHUNK_ROUNDING_NEAREST": "y",
        }
    )
    cfg = from_run_config(run, 64)
    assert (cfg.attention, cfg.rgsa_top_b, cfg.rgsa_routing, cfg.rgsa_local_window) == (
        "rgsa",
        4,
        "random",
        256,  # knlp's default
    )
    assert (cfg.rgsa_chunk_schedule, cfg.rgsa_chunk_piecewise, cfg.rgsa_chunk_rounding) == (
        "piecewise",
        "64:16",
        "nearest",
    )
    assert variant(run) == "rgsa"


@pytest.mark.parametrize(
    "overrides, message",
    [
        (dict(rgsa_chunk_piecewise="512-32"), '"threshold:size" pairs'),
        (dict(rgsa_chunk_size_min=300, rgsa_chunk_size_max=200), "must not exceed"),
        (dict(rgsa_top_b=0), "rgsa_top_b=0 is invalid"),
        (dict(rgsa_chunk_rounding="pow3"), "pow2, multiple_of_8, nearest"),
    ],
)
def test_bad_settings_are_refused_naming_the_setting(overrides, message) -> None:
    fields = {**SMALL, "rgsa_dynamic_chunking": True, "rgsa_chunk_schedule": "piecewise"}
    with pytest.raises(ValueError, match=message):
        GPT2Config(**{**fields, **overrides})
