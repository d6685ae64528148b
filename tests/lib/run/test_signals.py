"""Stop signals: SIGTERM, SIGINT and SIGUSR1 stop a run at a step boundary with a
checkpoint and exit code 75, and the resumed run equals the uninterrupted one
bit for bit, whenever the signal lands; throughput survives many short segments."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
import types

import pytest

from lib.config.kconfig import ROOT
from lib.run import signals
from lib.run.checkpoint import load_checkpoint
from lib.run.metrics import WARMUP_STEPS
from lib.run.signals import EXIT_RESUMABLE, Abandoned, StopRequest
from lib.train.trainer import Trainer
from tests.lib.stops import train_until

SEED, RANDOM_TRIALS = 20260114, 18


def test_a_stop_signal_sets_a_flag_repeats_count_once_a_later_one_abandons(monkeypatch):
    # The handler's clock is the test's: "within the window" is decided, not raced (a
    # loaded host could otherwise pause between the first two signals past the window).
    now = [1000.0]
    monkeypatch.setattr(
        signals, "time", types.SimpleNamespace(monotonic=lambda: now[0], sleep=time.sleep)
    )
    request = StopRequest()
    assert request.install()
    try:
        os.kill(os.getpid(), signal.SIGUSR1)  # the handler runs before the next line
        assert request.signal == "SIGUSR1" and not request.abandoned
        now[0] += signals.REPEAT_WINDOW_S * 0.99
        os.kill(os.getpid(), signal.SIGTERM)  # the same stop delivered twice: no effect
        assert request.signal == "SIGUSR1" and not request.abandoned
        now[0] += signals.REPEAT_WINDOW_S * 0.02  # past the window of the first signal
        with pytest.raises(Abandoned, match="SIGINT"):
            os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGINT)  # abandoned once: never raises again
    finally:
        request.uninstall()
    assert signal.getsignal(signal.SIGINT) is not request.handle


@pytest.mark.slow  # many real runs stopped and resumed: about a minute on 2 idle cores
def test_runs_stopped_at_random_moments_resume_exactly(tmp_path):
    """Real signals (SIGINT, SIGTERM, SIGUSR1) to real training processes, at
    random delays and at chosen points (setup, drawing a batch, inside the
    optimizer step, during an evaluation, while writing a checkpoint, twice):
    every resumed run's per-step train losses and val losses equal the
    uninterrupted run's exactly."""
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "tests" / "lib" / "run" / "signal_driver.py"),
            str(tmp_path),
            str(RANDOM_TRIALS),
            str(SEED),
        ],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    print("\n".join(json.dumps(line) for line in lines))  # the delays, for a failure's record
    ref, trials = lines[0], lines[1:-1]
    assert ref["same_as_first_reference"] and lines[-1] == {"done": True}
    assert len(trials) == RANDOM_TRIALS + 9
    for t in trials:
        what = json.dumps(t)
        assert t["same_train_losses"] and t["same_val_losses"], what
        assert t["final_val_loss"] == ref["final_val_loss"], what
        assert t["final_status"] == "completed" and t["iterations"] == 12, what
        assert t["first_exit"] in (0, EXIT_RESUMABLE), what
        if t["first_exit"] == EXIT_RESUMABLE:
            assert t["stopped_status"] == "stopped" and t["stop_signal"] == t["signal"], what
            assert t["signal"] in t["reason"] and t["resume_exit"] == 0, what
    # Where the random delays land depends on the machine's load (the chosen
    # points below do not): at least some must have stopped a run.
    assert any(t["first_exit"] for t in trials if t["trial"].startswith("random"))

    for t in (t for t in trials if t["hook"]):
        key = t["trial"]
        point, nth, again = t["hook"]["point"], t["hook"]["nth"], t["hook"]["again"]
        # Stops after the step the signal fell in: 2 training batches per step
        # (accumulation), 4 validation batches per evaluation (every 4 steps).
        step = {
            "setup": 0,
            "train_batch": math.ceil(nth / 2),
            "optimizer_step": nth,
            "val_batch": 4 * math.ceil(nth / 4),
            "checkpoint_write": 4,
        }[point]
        if again in (None, "double"):  # one stop, even when delivered twice at once
            assert t["stopped_at"] == step and t["resumed_from"] == [step], key
            assert "with a checkpoint" in t["reason"], key
        else:  # a second signal later: stopped at once; resumes from the last checkpoint
            assert "stopped at once" in t["reason"], key
            last = 4 * ((step - 1) // 4) if point == "optimizer_step" else step - 4
            assert t["resumed_from"] == ([last] if last else []), key


def _segment(tiny_run, settings, run_dir, stop_after):
    ckpt = run_dir / "ckpt_latest.pt"
    state = load_checkpoint(ckpt) if ckpt.exists() else None
    trainer = Trainer(tiny_run(**settings), run_dir, log=lambda _: None, resume=state)
    return trainer, train_until(trainer, stop_after)


def test_throughput_survives_many_short_segments(tiny_run, tmp_path):
    """Stopped and resumed every 2 steps, no segment passes its warm-up: the
    figure is then taken over every step (it read 0.0); one long segment later
    measures its steps after the warm-up only."""
    settings = dict(GPT2_MAX_ITERS=20, GPT2_EVAL_INTERVAL=100, RUN_NAME="segments")
    run_dir = tmp_path / "results" / "segments"
    run_dir.mkdir(parents=True)
    tokens_per_iter = 8 * 32
    for stop_after in (2, 4, 6, 8):
        trainer, summary = _segment(tiny_run, settings, run_dir, stop_after)
        metrics = trainer.metrics
        assert summary["status"] == "stopped" and summary["iterations"] == stop_after
        assert metrics.timed_seconds == 0  # every segment within its warm-up
        assert metrics.all_tokens == stop_after * tokens_per_iter
        assert (
            summary["tokens_per_sec"]
            == pytest.approx(stop_after * tokens_per_iter / metrics.wall_time_s)
            and summary["tokens_per_sec"] > 0
        )
        assert summary["ms_per_iter"] > 0
    on_disk = json.loads((run_dir / "metrics.json").read_text())
    assert on_disk["tokens_per_sec"] == summary["tokens_per_sec"] > 0
    trainer, summary = _segment(tiny_run, settings, run_dir, None)  # steps 9..20
    metrics = trainer.metrics
    assert summary["status"] == "completed" and summary["iterations"] == 20
    assert metrics.timed_tokens == (12 - WARMUP_STEPS) * tokens_per_iter
    assert summary["tokens_per_sec"] == pytest.approx(metrics.timed_tokens / metrics.timed_seconds)
    assert metrics.all_tokens == 20 * tokens_per_iter
