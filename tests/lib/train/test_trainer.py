"""The training loop on CPU: learning, exact resume, stops, compile fallback."""

from __future__ import annotations

import json
import math

import pytest
import torch

from lib.run.checkpoint import load_checkpoint
from lib.train.naming import create_run_dir
from lib.train.trainer import Trainer
from tests.lib.stops import train_until
from tests.stochastic import observe


def train(run, stop_after=None, resume=None, run_dir=None):
    run_dir = run_dir or create_run_dir(run)
    trainer = Trainer(run, run_dir, log=lambda _: None, resume=resume)
    return trainer, train_until(trainer, stop_after), run_dir


@pytest.mark.stochastic
def test_short_cpu_run_validation_loss_falls(tiny_run, seed):
    run = tiny_run(
        GPT2_MAX_ITERS=60, GPT2_EVAL_INTERVAL=20, RUN_NAME="learn", TRAIN_SEED=str(1337 + seed)
    )
    _, summary, run_dir = train(run)
    val = summary["val_loss"]["values"]
    assert summary["status"] == "completed" and summary["iterations"] == 60
    # learnt something by step 20, and more by 60. Spread over seeds 0-7 at one
    # thread (AVX-512, AVX2 kernels) and 0-2 at 2 and 4: 0.696-0.719 of ln V at
    # step 20, the last loss 0.737-0.786 of the first.
    assert (
        observe("val loss at 20 / ln V", val[0] / math.log(summary["model_config"]["vocab_size"]))
        < 1
    )
    assert (
        observe("last / first val loss", val[-1] / val[0]) < 0.85 and val[-1] < val[1] < val[0]
    ), val
    on_disk = json.loads((run_dir / "metrics.json").read_text())
    for key in (
        "status",
        "iterations",
        "train_loss",
        "val_loss",
        "best_val_loss",
        "best_val_perplexity",
        "final_val_loss",
        "tokens_per_sec",
        "ms_per_iter",
        "mfu",
        "peak_memory_mb",
        "params",
        "effective_batch_size",
        "tokens_seen",
        "wall_time_s",
        "compiled",
        "device",
        "dtype",
    ):
        assert key in on_disk, key
    assert on_disk["best_val_perplexity"] == pytest.approx(math.exp(on_disk["best_val_loss"]))
    # char: one token per character, so per character is per token (lib/data/valchars.py)
    assert on_disk["val_tokens_per_char"] == 1.0 and on_disk["val_chars"] > 0
    assert on_disk["best_val_loss_per_char"] == on_disk["best_val_loss"]
    assert on_disk["val_loss_per_char"] == on_disk["val_loss"]
    assert on_disk["tokens_seen"] == 60 * 8 * 32 and on_disk["compiled"] is False
    assert on_disk["peak_memory_mb"] > 0 and on_disk["tokens_per_sec"] > 0
    assert on_disk["page_faults_per_iter"] >= 0 and on_disk["system_ms_per_iter"] >= 0


def test_resume_matches_uninterrupted_run(tiny_run):
    settings = dict(
        GPT2_MAX_ITERS=24, GPT2_EVAL_INTERVAL=8, GPT2_DROPOUT="0.1", GPT2_GRADIENT_ACCUMULATION=2
    )
    _, whole, _ = train(tiny_run(RUN_NAME="whole", **settings))
    first, part, run_dir = train(tiny_run(RUN_NAME="parts", **settings), stop_after=13)
    assert part["status"] == "stopped" and part["iterations"] == 13
    state = load_checkpoint(run_dir / "ckpt_latest.pt")
    assert state["step"] == 13
    _, resumed, _ = train(tiny_run(RUN_NAME="parts", **settings), resume=state, run_dir=run_dir)
    assert resumed["status"] == "completed"
    assert resumed["train_loss"] == whole["train_loss"]  # every logged loss, bit for bit
    assert resumed["val_loss"] == whole["val_loss"]


def test_divergence_stops_the_run_without_a_checkpoint(tiny_run):
    run = tiny_run(
        GPT2_MAX_ITERS=50,
        GPT2_EVAL_INTERVAL=1000,
        LEARNING_RATE="10",
        GPT2_WARMUP_STEPS=0,
        TRAIN_GRAD_CLIP="0",
        TRAIN_DIVERGENCE_FACTOR="1.5",
        RUN_NAME="diverge",
    )
    _, summary, run_dir = train(run)
    assert summary["status"] == "diverged", summary["reason"]
    assert summary["iterations"] < 50
    assert "exceeds" in summary["reason"] or "nan" in summary["reason"].lower()
    assert not (run_dir / "ckpt_latest.pt").exists()


def test_time_limit_stops_with_a_resumable_checkpoint(tiny_run):
    run = tiny_run(
        GPT2_MAX_ITERS=100000, GPT2_EVAL_INTERVAL=100000, TRAIN_MAX_TIME=1, RUN_NAME="timed"
    )
    _, summary, run_dir = train(run)
    assert summary["status"] == "stopped" and "TRAIN_MAX_TIME" in summary["reason"]
    assert load_checkpoint(run_dir / "ckpt_latest.pt")["step"] == summary["iterations"] > 0


def failing_compile(model, *options):
    def compiled(*args, **kwargs):
        raise RuntimeError("backend exploded (simulated)")

    return compiled


def test_compile_failure_falls_back_to_eager_and_is_recorded(tiny_run, monkeypatch):
    monkeypatch.setattr("lib.speed.apply.compile_model", failing_compile)
    settings = dict(GPT2_MAX_ITERS=6, GPT2_EVAL_INTERVAL=3)
    _, eager, _ = train(tiny_run(RUN_NAME="eager", **settings))
    _, fell_back, run_dir = train(tiny_run(RUN_NAME="compiled", COMPILE_MODEL="y", **settings))
    assert fell_back["status"] == "completed" and fell_back["compiled"] is False
    assert "backend exploded" in fell_back["compile_error"]
    assert fell_back["events"][0]["event"] == "compile_failed"
    assert fell_back["train_loss"] == eager["train_loss"]  # same batches after the fallback
    assert json.loads((run_dir / "metrics.json").read_text())["compiled"] is False


def test_compile_failure_stops_the_run_when_strict(tiny_run, monkeypatch):
    monkeypatch.setattr("lib.speed.apply.compile_model", failing_compile)
    run = tiny_run(GPT2_MAX_ITERS=3, COMPILE_MODEL="y", COMPILE_STRICT="y", RUN_NAME="strict")
    with pytest.raises(RuntimeError, match="COMPILE_STRICT"):
        train(run)


@pytest.mark.slow
def test_torch_compile_really_runs_on_cpu(tiny_run):
    run = tiny_run(GPT2_MAX_ITERS=4, GPT2_EVAL_INTERVAL=4, COMPILE_MODEL="y", RUN_NAME="inductor")
    _, summary, _ = train(run)
    assert summary["compiled"] is True and summary["compile_error"] is None
    assert summary["status"] == "completed"


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("dtype", ["BF16", "FP16"])
def test_mixed_precision_trains_on_gpu(tiny_run, dtype):
    run = tiny_run(
        GPT2_MAX_ITERS=30,
        GPT2_EVAL_INTERVAL=10,
        DEVICE_CUDA="y",
        **{f"MIXED_PRECISION_DTYPE_{dtype}": "y"},
        RUN_NAME=f"gpu-{dtype}",
    )
    _, summary, _ = train(run)
    assert summary["dtype"] == dtype.lower() and summary["status"] == "completed"
    assert summary["val_loss"]["values"][-1] < summary["val_loss"]["values"][0]


def test_divergence_is_found_within_its_log_interval(tiny_run):
    # Losses are read once per TRAIN_LOG_INTERVAL: the run stops at the end of the
    # interval in which it diverged, and the reason names the step it diverged at.
    import re

    run = tiny_run(
        GPT2_MAX_ITERS=50,
        GPT2_EVAL_INTERVAL=1000,
        LEARNING_RATE="10",
        GPT2_WARMUP_STEPS=0,
        TRAIN_GRAD_CLIP="0",
        TRAIN_DIVERGENCE_FACTOR="1.5",
        TRAIN_LOG_INTERVAL=5,
        RUN_NAME="diverge-late",
    )
    _, summary, run_dir = train(run)
    assert summary["status"] == "diverged", summary["reason"]
    stopped = summary["iterations"]
    at = int(re.search(r"at step (\d+)", summary["reason"]).group(1))
    assert stopped % 5 == 0 and stopped - 5 < at <= stopped, (stopped, summary["reason"])
    assert (f"(read at step {stopped})" in summary["reason"]) == (at != stopped)
    assert all(i == 1 or i % 5 == 0 for i in summary["train_loss"]["iters"])
    assert not (run_dir / "ckpt_latest.pt").exists()
