"""make bench-seqlen's settings: small and eager on a CPU, long contexts on CUDA."""

from __future__ import annotations

import pytest
import torch

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
