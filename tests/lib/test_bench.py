"""make bench's measurement: both loops timed, figures consistent."""

from __future__ import annotations

import pytest
import torch

from gpt2.variants import VARIANTS
from lib.bench.step import PINNED_SLOTS, run_bench, synthetic_batches


def test_bench_times_our_step_and_the_plain_loop(tiny_run):
    result = run_bench(tiny_run(GPT2_GRADIENT_ACCUMULATION=2), steps=2, warmup=1, rounds=1)
    tokens = 8 * 2 * 32  # batch x accumulation x block
    assert result["tokens_per_iter"] == tokens
    for name in ("ours", "plain"):
        m = result[name]
        assert m["ms_per_iter"] > 0
        assert m["tokens_per_sec"] == pytest.approx(tokens / (m["ms_per_iter"] / 1000))
        assert m["mfu"] is None  # fp32 on CPU: no published peak to divide by
    assert result["speed_vs_plain"] == pytest.approx(
        result["plain"]["ms_per_iter"] / result["ours"]["ms_per_iter"]
    )
    assert result["peak_memory_mb"] > 0 and result["dtype"] == "fp32"


def test_optimizer_bench_reports_each_optimizer_and_mask_costs(tiny_run):
    from lib.bench.optimizers import NAMES, run_optimizer_bench

    r = run_optimizer_bench(tiny_run(), steps=2, rounds=1)  # no pruning configured: every 10
    for name in NAMES:
        assert r[name]["full_step_ms"] > 0 and r[name]["optimizer_step_ms"] > 0
    for name in ("adamwspam", "adamwprune"):
        assert r[name]["full_step_vs_adamw"] == pytest.approx(
            r[name]["full_step_ms"] / r["adamw"]["full_step_ms"]
        )
    prune = r["adamwprune"]
    assert r["frequency"] == 10
    assert prune["mask_update_amortised_ms"] == pytest.approx(prune["mask_update_ms"] / 10)
    assert prune["mask_update_share_of_step"] == pytest.approx(
        prune["mask_update_amortised_ms"] / r["adamw"]["full_step_ms"]
    )
    assert r["speed"]["loss_impl"] == "plain"


def test_optimizer_bench_applies_the_run_s_speed_options(tiny_run, monkeypatch):
    """What the user sets is what bench-optim times: the chunked head loss runs."""
    from lib.bench.optimizers import run_optimizer_bench
    from lib.model import fused_loss

    calls = []
    real = fused_loss.chunked_linear_cross_entropy
    monkeypatch.setattr(
        fused_loss, "chunked_linear_cross_entropy", lambda *a, **k: calls.append(1) or real(*a, **k)
    )
    r = run_optimizer_bench(
        tiny_run(TRAIN_LOSS_IMPL_CHUNKED="y", CPU_LINEAR_BACKEND_ATEN="y"), steps=1, rounds=1
    )
    assert (r["speed"]["loss_impl"], r["speed"]["cpu_linear"]) == ("chunked", "aten")
    assert calls  # every optimizer's steps went through the chunked loss


def test_seqlen_bench_rows_state_sizes_and_plot(tiny_run, tmp_path):
    from lib.bench.seqlen import plot_seqlen, run_seqlen_bench

    run = tiny_run(GPT2_N_EMBD="32", GPT2_N_HEAD="2", GPT2_N_LAYER="2")
    result = run_seqlen_bench(run, vocab=64, lengths=(16, 32), steps=1)
    rows = {(r["variant"], r["seq_len"]): r for r in result["rows"]}
    # every family's, from the registries (gpt2/variants.py: those with bench=True)
    variants = [v.name for v in VARIANTS if v.bench] + ["hamt"]
    assert {"vanilla", "mla", "hamt"} <= set(variants)
    assert result["variants"] == variants
    assert set(rows) == {(v, t) for v in variants for t in (16, 32)}
    for row in rows.values():
        assert row["train_tokens_per_sec"] > 0 and row["gen_ms_per_token"] > 0
        assert row["peak_memory_mb"] > 0
    # HAMT's state does not grow; attention caches grow linearly with the context.
    assert rows["hamt", 16]["state_bytes"] == rows["hamt", 32]["state_bytes"]
    assert rows["vanilla", 32]["state_bytes"] == 2 * rows["vanilla", 16]["state_bytes"]
    # MLA caches latent_dim per token and layer against vanilla's 2 x n_embd.
    latent = max(16, 32 // 4)
    assert rows["mla", 32]["state_bytes"] * 2 * 32 == rows["vanilla", 32]["state_bytes"] * latent
    png = tmp_path / "seqlen.png"
    plot_seqlen(result, str(png))
    assert png.stat().st_size > 10_000


def test_bench_breakdown_sums_to_the_step_and_names_each_side(tiny_run):
    result = run_bench(tiny_run(), steps=2, warmup=1, rounds=1, profile_steps=3)
    b = result["breakdown"]
    parts = b["parts_ms"]
    assert set(parts) == {"data", "forward", "backward", "optimizer", "pruning", "host_overhead"}
    assert sum(parts.values()) == pytest.approx(b["step_ms"], rel=1e-9)  # by construction...
    for name in ("data", "forward", "backward", "optimizer"):
        assert parts[name] > 0, name
    assert parts["pruning"] == 0  # no pruner configured
    # ...so the real check: the ranges hold most of the step, not the remainder.
    assert 0 <= parts["host_overhead"] < 0.5 * b["step_ms"]
    assert parts["forward"] + parts["backward"] > parts["data"]
    assert sum(b["shares"].values()) == pytest.approx(1.0)
    assert result["ours"]["optimizer"] == "AdamW (fused)" and result["ours"]["pruning"] is None
    assert result["plain"]["optimizer"] == "AdamW (torch default)"  # nanoGPT's CPU choice


def test_bench_breakdown_counts_the_pruners_time(tiny_run):
    run = tiny_run(
        PRUNING_MODE_SINGLE="y",
        PRUNING_METHOD_MAGNITUDE="y",
        PRUNING_WARMUP="2",
        PRUNING_FREQUENCY="2",
        PRUNING_RAMP_END="200",
    )
    result = run_bench(run, steps=2, warmup=1, rounds=1, profile_steps=4)
    assert result["ours"]["pruning"] == "magnitude" and result["plain"]["pruning"] is None
    assert result["breakdown"]["parts_ms"]["pruning"] > 0


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_batches_through_pinned_buffers_match_the_cpu_ones():
    """The plain loop's and ours' batches on CUDA: copied without blocking from
    host buffers taken in turn; more batches than buffers, none waited on,
    and each still holds what the CPU path draws (no buffer rewritten while
    its copy was in flight)."""
    shape = (8, 4096)
    cpu = synthetic_batches(50257, shape, torch.device("cpu"))
    cuda = synthetic_batches(50257, shape, torch.device("cuda"))
    got = [cuda() for _ in range(3 * PINNED_SLOTS)]
    torch.cuda.synchronize()
    for x, y in got:
        want_x, want_y = cpu()
        assert torch.equal(x.cpu(), want_x) and torch.equal(y.cpu(), want_y)
