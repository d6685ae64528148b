"""make bench-seqlen's settings: small and eager on a CPU, long contexts on CUDA."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

import lib.bench.models as models
import lib.bench.seqlen as seqlen
from lib.bench.seqlen import BenchSettings, run_seqlen_bench
from lib.speed import cpu_linear
from lib.speed.cpu_linear import onednn_available, why_not_onednn
from lib.speed.precision import Precision


def test_cpu_keeps_the_small_eager_settings_and_cuda_gets_the_long_ones(tiny_run, monkeypatch):
    run = tiny_run(COMPILE_MODEL="y", MIXED_PRECISION="y", MIXED_PRECISION_DTYPE_BF16="y")
    cpu = BenchSettings.for_device(run, torch.device("cpu"))
    assert (cpu.lengths, cpu.tokens_per_step, cpu.variants) == (
        (64, 128, 256, 512, 1024, 2048),
        2048,
        None,
    )
    assert not cpu.compile and not cpu.sdpa_flash  # compiling costs more than it saves here
    assert cpu.cpu_linear == "aten"  # bf16 autocast: PyTorch's own kernels
    # On CUDA (no GPU needed to choose): the configured bf16 and compile, 64k tokens.
    monkeypatch.setattr(
        seqlen, "resolve_precision", lambda run, device: Precision(device, "bf16", "as configured")
    )
    gpu = BenchSettings.for_device(run, torch.device("cuda"))
    assert gpu.lengths == (1024, 2048, 4096, 8192, 16384)
    assert gpu.tokens_per_step == 65536 and gpu.variants == ("vanilla", "hamt")
    assert (gpu.dtype, gpu.compile, gpu.sdpa_flash) == ("bf16", True, True)
    assert min(gpu.tokens_per_step // t for t in gpu.lengths) == 4  # batch = tokens // T
    mine = BenchSettings.for_device(run, torch.device("cuda"), (512,), 4096, ("mla",))
    assert (mine.lengths, mine.tokens_per_step, mine.variants) == ((512,), 4096, ("mla",))


def test_chosen_variants_rows_and_what_ran(tiny_run, monkeypatch):
    onednn = onednn_available() and why_not_onednn() is None  # its probe, before counting
    calls = []
    real = cpu_linear.onednn_linear
    monkeypatch.setattr(cpu_linear, "onednn_linear", lambda *a: calls.append(1) or real(*a))
    run = tiny_run(GPT2_N_EMBD="32", GPT2_N_HEAD="2", GPT2_N_LAYER="2")
    result = run_seqlen_bench(
        run, vocab=64, lengths=(16,), steps=1, tokens=64, variants=("vanilla", "hamt")
    )
    assert result["variants"] == ["vanilla", "hamt"]
    assert [(r["variant"], r["batch_size"]) for r in result["rows"]] == [
        ("vanilla", 4),
        ("hamt", 4),
    ]
    assert result["settings"]["dtype"] == "fp32"
    # fp32 eager on a CPU: the linear layers where auto puts them, as the trainer runs them
    assert result["settings"]["cpu_linear"] == ("onednn" if onednn else "aten")
    assert bool(calls) == onednn
    assert result["compiled"] == {"vanilla": False, "hamt": False}
    assert result["kernels"]["hamt"]["hamt_scan_backend"] == "torch"  # auto on a CPU
    assert result["kernels"]["vanilla"] == {}
    with pytest.raises(ValueError, match="unknown variants flash"):
        run_seqlen_bench(run, vocab=64, lengths=(16,), steps=1, variants=("flash",))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_gpu_path_autocast_flash_and_own_peak_memory(tiny_run):
    run = tiny_run(
        GPT2_N_EMBD="64",
        GPT2_N_HEAD="1",
        GPT2_N_LAYER="2",
        DEVICE_CUDA="y",
        MIXED_PRECISION="y",
        MIXED_PRECISION_DTYPE_BF16="y",
        COMPILE_MODEL="n",
    )
    result = run_seqlen_bench(run, vocab=64, lengths=(128, 256), steps=2, tokens=1024)
    assert result["settings"]["sdpa_flash"] and result["settings"]["dtype"] == "bf16"
    for row in result["rows"]:
        assert "error" not in row, row
        assert row["train_tokens_per_sec"] > 0 and row["gen_ms_per_token"] > 0
        # at least the variant's own weights and moments (fp32: 12 bytes per parameter)
        assert row["peak_memory_mb"] * 2**20 > 12 * result["params"][row["variant"]]


def test_phases_in_order_and_training_figures_stored_before_generation(tiny_run, monkeypatch):
    """What a stage cut at its cap keeps: each phase as it begins, and a
    length's training figures before its generation is timed."""
    run = tiny_run(GPT2_N_EMBD="32", GPT2_N_HEAD="2", GPT2_N_LAYER="2")
    events: list[tuple[str, object]] = []
    real = seqlen._generate

    def generate(model, vocab, seq_len, *args):
        events.append(("generate", seq_len))
        return real(model, vocab, seq_len, *args)

    monkeypatch.setattr(seqlen, "_generate", generate)

    run_seqlen_bench(
        run,
        vocab=64,
        lengths=(16, 32),
        steps=2,
        tokens=64,
        variants=("vanilla", "hamt"),
        # copies, as put stores them: a row's generation figures join it in place
        on_row=lambda rows: events.append(("rows", [dict(r) for r in rows])),
        on_phase=lambda name: events.append(("phase", name)),
    )
    phases = [what for kind, what in events if kind == "phase"]
    per_length = [
        "vanilla {t} warm-up",
        "vanilla {t} peak-memory step",
        "hamt {t} warm-up",
        "hamt {t} peak-memory step",
        "{t} timed steps",
        "vanilla {t} generation",
        "hamt {t} generation",
    ]
    assert phases == ["build models"] + [p.format(t=t) for t in (16, 32) for p in per_length]
    # The first rows stored: 16's training figures, before any generation ran.
    first = next(i for i, (kind, _) in enumerate(events) if kind == "rows")
    assert ("generate", 16) not in events[:first]
    rows = events[first][1]
    assert [(r["variant"], r["seq_len"]) for r in rows] == [("vanilla", 16), ("hamt", 16)]
    assert all(r["train_tokens_per_sec"] > 0 and "gen_ms_per_token" not in r for r in rows)
    # Then each variant's generation joins its row, and 32's training follows.
    stored = [what for kind, what in events if kind == "rows"]
    assert ["gen_ms_per_token" in r for r in stored[1]] == [True, False]
    assert ["gen_ms_per_token" in r for r in stored[2]] == [True, True]
    assert [len(r) for r in stored] == [2, 2, 2, 4, 4, 4]
    assert events.index(("phase", "vanilla 16 generation")) < events.index(("generate", 16))


def test_measured_rows_are_not_trained_again_and_only_lack_generation(tiny_run, monkeypatch):
    """A run resumed after its cap cut generation short: that length's
    training figures are kept and only the missing generation is timed."""
    run = tiny_run(GPT2_N_EMBD="32", GPT2_N_HEAD="2", GPT2_N_LAYER="2")
    trained: list[int] = []
    real = seqlen.train_all
    monkeypatch.setattr(
        seqlen,
        "train_all",
        lambda models, vocab, t, *a: trained.append(t) or real(models, vocab, t, *a),
    )
    trained_16 = {"train_tokens_per_sec": 1.0, "peak_memory_mb": 2.0}
    measured = [
        {"variant": "vanilla", "seq_len": 16, **trained_16, "gen_ms_per_token": 3.0},
        {"variant": "hamt", "seq_len": 16, **trained_16},  # cut during its generation
        # 32: hamt's training ran out of memory, so the length is measured again
        {"variant": "vanilla", "seq_len": 32, "train_tokens_per_sec": 7.0, "peak_memory_mb": 8.0},
        {"variant": "hamt", "seq_len": 32, "error": "out of memory: x"},
    ]
    phases: list[str] = []
    result = run_seqlen_bench(
        run,
        vocab=64,
        lengths=(16, 32),
        steps=1,
        tokens=64,
        variants=("vanilla", "hamt"),
        on_phase=phases.append,
        measured=measured,
    )
    assert trained == [32]
    rows = {(r["variant"], r["seq_len"]): r for r in result["rows"]}
    assert rows["vanilla", 16] == measured[0]
    assert rows["hamt", 16]["train_tokens_per_sec"] == 1.0
    assert rows["hamt", 16]["gen_ms_per_token"] > 0
    assert rows["vanilla", 32]["train_tokens_per_sec"] != 7.0 and "error" not in rows["hamt", 32]
    assert "vanilla 16 generation" not in phases and "hamt 16 generation" in phases
    assert "hamt 16" not in " ".join(p for p in phases if "generation" not in p)
    assert "error" not in measured[1] and "gen_ms_per_token" not in measured[1]  # not changed


def test_only_the_chosen_variants_are_built(tiny_run, monkeypatch):
    """At GPT-2 124M's width and 8,192 tokens each model costs seconds and its
    weights' memory: the ones not measured are not built."""
    from lib.model import registry

    built = []
    spied = [
        replace(f, build=lambda config, real=f.build: built.append(config) or real(config))
        for f in registry.families()
    ]
    monkeypatch.setattr(registry, "families", lambda: spied)
    run = tiny_run(GPT2_N_EMBD="32", GPT2_N_HEAD="2", GPT2_N_LAYER="1")
    assert list(models.build_models(run, 64, 16, ("hamt", "vanilla"))) == ["vanilla", "hamt"]
    assert [(type(c).__name__, getattr(c, "attention", "")) for c in built] == [
        ("GPT2Config", "vanilla"),
        ("HAMTConfig", ""),
    ]
    assert len(models.bench_configs(run, 64, 16)) > 2  # the other variants exist
