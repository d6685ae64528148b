"""Inference figures: measured per family, recorded at the end of a run and by
`make bench-inference`, shown by `make results`."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import torch

import gpt2
import hamt
from gpt2.config import GPT2Config
from hamt.config import HAMTConfig
from lib.bench.inference import (
    REPEATS,
    bench_run,
    check_lengths,
    inference_at_end,
    measure,
    parse_lengths,
    plan_lengths,
)
from lib.config.kconfig import ConfigError
from lib.results.collect import read_run
from lib.results.tables import columns, markdown
from lib.run import owner
from lib.speed.precision import Precision
from lib.train.naming import create_run_dir
from lib.train.trainer import Trainer

ROOT = Path(__file__).resolve().parents[2]
FP32 = Precision(torch.device("cpu"), "fp32", "test")
FP32_BYTES = 4


def gpt(**fields):
    return gpt2.FAMILY.build(
        GPT2Config(vocab_size=64, block_size=64, n_layer=2, n_head=2, n_embd=64, **fields)
    )


def test_gpt2_figures_are_positive_and_mla_caches_less_per_token_by_its_formula():
    vanilla = measure(gpt(), FP32, [16, 40], decode_tokens=4, log=lambda _: None)
    mla = measure(
        gpt(attention="mla", latent_dim=16, rope_dim=8),
        FP32,
        [16, 40],
        decode_tokens=4,
        log=lambda _: None,
    )
    for section in (vanilla, mla):
        assert (
            section["dtype"],
            section["batch"],
            section["decode_tokens"],
            section["repeats"],
        ) == ("fp32", 1, 4, REPEATS)
        assert [r["prompt_tokens"] for r in section["lengths"]] == [16, 40]
        for r in section["lengths"]:
            assert r["prefill_ms"] > 0 and r["decode_tokens_per_sec"] > 0
            assert r["prefill_tokens_per_sec"] == pytest.approx(
                r["prompt_tokens"] / (r["prefill_ms"] / 1000)
            )
            assert r["decode_ms_per_token"] == pytest.approx(1000 / r["decode_tokens_per_sec"])
            assert r["cache_bytes_measured"] is None  # CUDA only
    # Per token and layer: vanilla keeps K and V (2 x n_embd), MLA the latent and RoPE key.
    for v, m in zip(vanilla["lengths"], mla["lengths"]):
        t = v["prompt_tokens"]
        assert v["cache_bytes"] == 2 * (2 * 64) * FP32_BYTES * t
        assert m["cache_bytes"] == 2 * (16 + 8) * FP32_BYTES * t
        assert m["cache_bytes"] / v["cache_bytes"] == pytest.approx((16 + 8) / (2 * 64))


def test_hamt_state_is_the_same_size_at_every_length():
    model = hamt.FAMILY.build(
        HAMTConfig(
            vocab_size=64, block_size=64, n_layer=2, n_head=2, n_embd=32, num_slots=16, hcm_mult=2
        )
    )
    model.train()
    section = measure(model, FP32, [8, 48], decode_tokens=4, log=lambda _: None)
    assert model.training  # the mode it had is restored
    rows = section["lengths"]
    assert [r["prompt_tokens"] for r in rows] == [8, 48]
    assert all(r["prefill_ms"] > 0 and r["decode_tokens_per_sec"] > 0 for r in rows)
    # Per layer, num_slots packed spectra of hcm_dim = hcm_mult x n_embd floats.
    assert [r["cache_bytes"] for r in rows] == [2 * 16 * (2 * 32) * FP32_BYTES] * 2


def test_lengths_are_parsed_checked_and_clipped_to_the_block(tiny_run):
    assert parse_lengths("512 128,128") == [128, 512]
    for bad in ("", "12x", "0", "-4", "2000000"):
        with pytest.raises(ValueError, match="CONFIG_INFERENCE_BENCH_LENGTHS"):
            parse_lengths(bad)
    assert check_lengths(tiny_run(INFERENCE_BENCH_LENGTHS="64,128")) == []
    with pytest.raises(ConfigError) as err:  # a rule: refused when the configuration loads
        tiny_run(INFERENCE_BENCH_LENGTHS="64,12x")
    assert err.value.problems == [
        'CONFIG_INFERENCE_BENCH_LENGTHS="64,12x": "12x" is not a whole number of tokens '
        "from 1 to 1048576"
    ]
    assert plan_lengths([128, 512], 32, 1024) == ([128, 512], 32)
    assert plan_lengths([16, 128, 512], 32, 64) == ([16, 32], 32)  # 64 - 32 decoded
    assert plan_lengths([16], 100, 64) == ([16], 32)  # decoding takes at most half


@pytest.fixture
def finished(tiny_run):
    """A tiny run trained to its end with INFERENCE_BENCH=y on the CPU."""
    run = tiny_run(
        GPT2_MAX_ITERS=4,
        GPT2_EVAL_INTERVAL=2,
        RUN_NAME="inf",
        INFERENCE_BENCH_Y="y",
        INFERENCE_BENCH_LENGTHS="8,64",
        INFERENCE_BENCH_DECODE_TOKENS="4",
    )
    run_dir = create_run_dir(run)
    lines: list[str] = []
    Trainer(run, run_dir, log=lines.append).train()
    return run, run_dir, lines


def test_the_end_of_a_run_records_the_section_in_metrics_json(finished):
    _, run_dir, lines = finished
    metrics = json.loads((run_dir / "metrics.json").read_text())
    section = metrics["inference"]
    assert metrics["status"] == "completed" and section["source"] == "final weights"
    # Block 32: 64 is clipped to 32 - 4 decoded tokens.
    assert section["lengths_requested"] == [8, 64]
    assert [r["prompt_tokens"] for r in section["lengths"]] == [8, 28]
    per_token = 2 * 2 * 32 * FP32_BYTES  # layers x (K, V) x n_embd x fp32
    assert [r["cache_bytes"] for r in section["lengths"]] == [8 * per_token, 28 * per_token]
    assert any(line.startswith("inference on cpu (fp32)") for line in lines)


def test_auto_skips_cpu_runs_and_no_run_stopped_by_a_signal_is_measured(tiny_run, tmp_path):
    model = gpt()
    metrics = tmp_path / "metrics.json"
    cases = [
        (tiny_run(), {"status": "completed"}),  # auto, on the CPU
        (tiny_run(INFERENCE_BENCH_N="y"), {"status": "completed"}),
        (tiny_run(INFERENCE_BENCH_Y="y"), {"status": "stopped", "stop_signal": "SIGTERM"}),
        (tiny_run(INFERENCE_BENCH_Y="y"), {"status": "diverged"}),
    ]
    for run, record in cases:
        metrics.write_text(json.dumps(record))
        assert inference_at_end(run, model, tmp_path, print) is None
        assert json.loads(metrics.read_text()) == record
    run = tiny_run(INFERENCE_BENCH_Y="y", INFERENCE_BENCH_LENGTHS="8")
    metrics.write_text(json.dumps({"status": "stopped", "stop_signal": None}))  # TRAIN_MAX_TIME
    assert inference_at_end(run, model, tmp_path, print) is not None
    assert "inference" in json.loads(metrics.read_text())


def test_a_failed_measurement_is_recorded_and_never_fails_the_run(tiny_run, tmp_path):
    run = tiny_run(INFERENCE_BENCH_Y="y", INFERENCE_BENCH_LENGTHS="8")
    (tmp_path / "metrics.json").write_text(json.dumps({"status": "completed"}))
    model = gpt()
    model.start_generation = lambda idx: (_ for _ in ()).throw(RuntimeError("out of memory"))
    lines: list[str] = []
    section = inference_at_end(run, model, tmp_path, lines.append)
    assert section == {"error": "RuntimeError: out of memory"}
    assert json.loads((tmp_path / "metrics.json").read_text())["inference"] == section
    assert "make bench-inference" in lines[-1]


def test_results_show_the_figures_per_prompt_length(finished):
    _, run_dir, _ = finished
    row = read_run(run_dir)
    headers = [h for h, _, _ in columns([row])]
    for length in (8, 28):
        assert {f"prefill ms @{length}", f"decode tok/s @{length}", f"cache KiB @{length}"} <= set(
            headers
        )
    table = markdown([row], {})
    cells = dict(zip(headers, table.splitlines()[-1].strip("| ").split(" | ")))
    assert cells["cache KiB @8"] == "4"  # 8 tokens x 512 bytes
    assert cells["cache KiB @28"] == "14"
    assert float(cells["decode tok/s @28"].replace(",", "")) > 0


def test_bench_run_measures_a_finished_runs_best_checkpoint(finished, tiny_run):
    run, run_dir, _ = finished
    section = bench_run(run_dir, "best", tiny_run(INFERENCE_BENCH_LENGTHS="16"), log=lambda _: None)
    assert section["source"] == "ckpt_best.pt (step 4)"
    recorded = json.loads((run_dir / "metrics.json").read_text())["inference"]
    assert recorded == section and [r["prompt_tokens"] for r in recorded["lengths"]] == [16]


def make_bench_inference(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MAKE")}
    return subprocess.run(
        ["make", "--no-print-directory", "-C", str(ROOT), "bench-inference", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


@pytest.mark.slow
def test_make_bench_inference_on_a_finished_run(finished):
    _, run_dir, _ = finished
    args = (f"RUN={run_dir}", "SET=INFERENCE_BENCH_LENGTHS=12,20", "DEVICE=cpu")
    busy = make_bench_inference(*args)  # this process still owns the run it trained
    assert busy.returncode != 0 and "is being trained by" in busy.stderr
    owner.release(run_dir)  # as when training has ended: its process is gone
    out = make_bench_inference(*args)
    assert out.returncode == 0, out.stderr
    assert "inference on cpu (fp32)" in out.stdout
    section = json.loads((run_dir / "metrics.json").read_text())["inference"]
    assert section["source"] == "ckpt_best.pt (step 4)"
    assert [r["prompt_tokens"] for r in section["lengths"]] == [12, 20]
