"""When checkpoints are written (SAVE_CHECKPOINT, CHECKPOINT_INTERVAL;
lib/run/checkpointer.py), and what a run without them tells the user."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import lib.run.checkpointer as checkpointer_module
from lib.run import owner
from lib.run.checkpoint import CheckpointError, load_checkpoint
from lib.run.checkpointer import Checkpointer
from lib.run.resume import not_resumable
from lib.train.naming import create_run_dir
from lib.train.trainer import Trainer
from tests.lib.stops import train_until

ROOT = Path(__file__).resolve().parents[3]


def _train(run, monkeypatch, stop_after=None):
    """Train run; returns (summary, run folder, [(file name, step) per checkpoint write])."""
    writes: list[tuple[str, int]] = []
    real = checkpointer_module.save_checkpoint

    def recording(path, state):
        writes.append((Path(path).name, state["step"]))
        real(path, state)

    monkeypatch.setattr(checkpointer_module, "save_checkpoint", recording)
    run_dir = create_run_dir(run)
    summary = train_until(Trainer(run, run_dir, log=lambda _: None), stop_after)
    return summary, run_dir, writes


def _steps(writes, name):
    return [step for file, step in writes if file == name]


def test_checkpointer_decides_from_the_interval_the_evaluations_and_the_last_step(tiny_run):
    def checkpointer(**settings):
        run = tiny_run(**settings)
        return Checkpointer.from_run(run.run, run.train)

    every6 = checkpointer(GPT2_MAX_ITERS=20, GPT2_EVAL_INTERVAL=10, CHECKPOINT_INTERVAL=6)
    assert [s for s in range(1, 21) if every6.latest_due(s)] == [6, 12, 18, 20]
    default = checkpointer(GPT2_MAX_ITERS=25, GPT2_EVAL_INTERVAL=10)
    assert [s for s in range(1, 26) if default.latest_due(s)] == [10, 20, 25]
    assert default.record() == {"save": True, "interval": 10}
    assert default.due_at_stop(13) and not default.due_at_stop(20)  # 20 was written in the loop
    assert default.due_at_stop(0)  # stopped before its first step: the loop wrote nothing
    off = checkpointer(GPT2_MAX_ITERS=20, SAVE_CHECKPOINT="n")
    assert not any(off.latest_due(s) or off.due_at_stop(s) for s in range(1, 21))
    assert not off.best_due(True) and off.record() == {"save": False, "interval": None}


def test_default_writes_latest_at_each_evaluation_as_before(tiny_run, monkeypatch):
    summary, run_dir, writes = _train(
        tiny_run(GPT2_MAX_ITERS=20, GPT2_EVAL_INTERVAL=5, RUN_NAME="default"), monkeypatch
    )
    assert summary["status"] == "completed"
    assert _steps(writes, "ckpt_latest.pt") == [5, 10, 15, 20]
    improved = [
        step
        for step, loss, best in zip(
            summary["val_loss"]["iters"],
            summary["val_loss"]["values"],
            [min(summary["val_loss"]["values"][: i + 1]) for i in range(4)],
        )
        if loss == best
    ]
    assert _steps(writes, "ckpt_best.pt") == improved and improved[0] == 5
    assert load_checkpoint(run_dir / "ckpt_latest.pt")["step"] == 20
    assert json.loads((run_dir / "metrics.json").read_text())["checkpoints"] == {
        "save": True,
        "interval": 5,
    }


def test_checkpoint_interval_sets_the_steps_of_the_resume_checkpoint(tiny_run, monkeypatch):
    run = tiny_run(
        GPT2_MAX_ITERS=20, GPT2_EVAL_INTERVAL=10, CHECKPOINT_INTERVAL=6, RUN_NAME="every6"
    )
    summary, run_dir, writes = _train(run, monkeypatch)
    assert _steps(writes, "ckpt_latest.pt") == [6, 12, 18, 20]  # and the last step
    assert set(_steps(writes, "ckpt_best.pt")) <= {10, 20} and 10 in _steps(writes, "ckpt_best.pt")
    assert load_checkpoint(run_dir / "ckpt_latest.pt")["step"] == 20
    assert summary["val_loss"]["iters"] == [10, 20]  # evaluations are not moved

    stopped, run_dir, writes = _train(
        tiny_run(GPT2_MAX_ITERS=20, GPT2_EVAL_INTERVAL=10, CHECKPOINT_INTERVAL=6, RUN_NAME="stop9"),
        monkeypatch,
        stop_after=9,
    )
    assert stopped["status"] == "stopped" and _steps(writes, "ckpt_latest.pt") == [6, 9]
    assert f"with a checkpoint; `make continue RUN={run_dir}` resumes it" in stopped["reason"]


def test_checkpoints_off_write_nothing_and_the_run_says_it_cannot_be_resumed(tiny_run, monkeypatch):
    summary, run_dir, writes = _train(
        tiny_run(GPT2_MAX_ITERS=12, GPT2_EVAL_INTERVAL=4, SAVE_CHECKPOINT="n", RUN_NAME="off"),
        monkeypatch,
    )
    assert summary["status"] == "completed" and summary["val_loss"]["iters"] == [4, 8, 12]
    assert writes == [] and not list(run_dir.glob("*.pt"))
    assert json.loads((run_dir / "metrics.json").read_text())["checkpoints"] == {
        "save": False,
        "interval": None,
    }
    with pytest.raises(CheckpointError, match="trained with SAVE_CHECKPOINT off, so it saved none"):
        load_checkpoint(run_dir / "ckpt_best.pt")  # make sample, eval, export

    stopped, run_dir, writes = _train(
        tiny_run(GPT2_MAX_ITERS=12, GPT2_EVAL_INTERVAL=4, SAVE_CHECKPOINT="n", RUN_NAME="offstop"),
        monkeypatch,
        stop_after=6,
    )
    assert stopped["status"] == "stopped" and writes == [] and not list(run_dir.glob("*.pt"))
    assert (
        "without a checkpoint (SAVE_CHECKPOINT is off): it cannot be resumed" in stopped["reason"]
    )
    message = not_resumable(run_dir, [])
    assert message is not None and message.startswith(
        "offstop was trained with checkpoints off (CONFIG_SAVE_CHECKPOINT is not set), so it "
        "has no checkpoint to resume from (it was stopped after step 6); nothing was changed"
    )
    assert f"cp {run_dir}/config.txt .config" in message

    # make continue: one paragraph, exit code 2, the run's files untouched
    owner.release(run_dir)  # this process trained it: its claim ends as the process would
    before = {
        p.name: p.read_bytes() for p in run_dir.iterdir() if p.is_file() and p.name != ".owner.lock"
    }
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "continue.py"), f"--run={run_dir}"],
        cwd=run_dir.parent,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.startswith("error: offstop was trained with checkpoints off")
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert {
        p.name: p.read_bytes() for p in run_dir.iterdir() if p.is_file() and p.name in before
    } == before


def test_a_run_with_checkpoints_on_stays_resumable(tiny_run, monkeypatch):
    _, run_dir, _ = _train(
        tiny_run(GPT2_MAX_ITERS=12, GPT2_EVAL_INTERVAL=4, RUN_NAME="on"), monkeypatch, stop_after=6
    )
    assert not_resumable(run_dir, []) is None
