"""Early stopping: the decision on loss sequences, and real runs that plateau."""

from __future__ import annotations

import json

from lib.run.checkpoint import load_checkpoint
from lib.train.early_stop import EarlyStop
from lib.train.naming import create_run_dir
from lib.train.trainer import Trainer
from tests.lib.stops import train_until


def stops_after(losses, patience, min_delta):
    """The 1-based evaluation at which the run stops, or None."""
    rule = EarlyStop(patience, min_delta)
    for i, loss in enumerate(losses, 1):
        if rule.update(loss):
            return i
    return None


def test_stops_after_patience_evaluations_without_improvement():
    assert stops_after([3.0, 2.5, 2.6, 2.7, 2.55], patience=3, min_delta=0.0) == 5
    assert stops_after([3.0, 2.5, 2.6, 2.4, 2.45, 2.41], patience=3, min_delta=0.0) is None


def test_improvements_smaller_than_min_delta_do_not_count():
    # each evaluation is a little better, but none by 0.01 on the best (2.0)
    losses = [2.0, 1.995, 1.993, 1.991]
    assert stops_after(losses, patience=3, min_delta=0.01) == 4
    assert stops_after(losses, patience=3, min_delta=0.001) is None


def test_margin_is_measured_from_the_last_real_improvement():
    # 2.0 -> 1.994 -> 1.988: each step under 0.01, but 1.988 is 0.012 below 2.0
    assert stops_after([2.0, 1.994, 1.988, 1.99], patience=2, min_delta=0.01) is None
    assert stops_after([2.0, 1.994, 1.988, 1.99, 1.99], patience=2, min_delta=0.01) == 5
    rule = EarlyStop(2, 0.01)
    for loss in (2.0, 1.994, 1.988):
        rule.update(loss)
    assert rule.best == 1.988 and rule.bad_evals == 0


def test_off_never_stops():
    assert stops_after([1.0] * 50, patience=0, min_delta=0.0) is None


def test_reason_names_the_setting():
    rule = EarlyStop(1, 0.5)
    rule.update(2.0)
    reason = rule.update(1.9)
    assert "not improved by more than 0.5" in reason and "TRAIN_EARLY_STOP_PATIENCE=1" in reason


PLATEAU = dict(
    LEARNING_RATE="1e-8",
    GPT2_MIN_LR="0",
    GPT2_EVAL_INTERVAL=5,
    GPT2_MAX_ITERS=100,
    TRAIN_EARLY_STOP="y",
    TRAIN_EARLY_STOP_MIN_DELTA="0.1",
)


def run(tiny_run, stop_after=None, resume=None, run_dir=None, **settings):
    cfg = tiny_run(**settings)
    run_dir = run_dir or create_run_dir(cfg)
    trainer = Trainer(cfg, run_dir, log=lambda _: None, resume=resume)
    return train_until(trainer, stop_after), run_dir


def test_a_plateaued_run_stops_early_as_completed(tiny_run):
    summary, run_dir = run(tiny_run, RUN_NAME="plateau", TRAIN_EARLY_STOP_PATIENCE=2, **PLATEAU)
    # eval 1 (step 5) sets the best; evals 2 and 3 cannot beat it by 0.1 at lr 1e-8
    assert summary["status"] == "completed" and summary["stopped_early"] is True
    assert summary["iterations"] == 15 and summary["val_loss"]["iters"] == [5, 10, 15]
    assert "early stop" in summary["reason"]
    on_disk = json.loads((run_dir / "metrics.json").read_text())
    assert on_disk["stopped_early"] is True and on_disk["status"] == "completed"
    assert load_checkpoint(run_dir / "ckpt_latest.pt")["step"] == 15


def test_a_learning_run_is_not_stopped(tiny_run):
    summary, _ = run(
        tiny_run,
        RUN_NAME="learning",
        GPT2_MAX_ITERS=30,
        GPT2_EVAL_INTERVAL=5,
        TRAIN_EARLY_STOP="y",
        TRAIN_EARLY_STOP_PATIENCE=2,
        TRAIN_EARLY_STOP_MIN_DELTA="0.01",
    )
    assert summary["status"] == "completed" and summary["stopped_early"] is False
    assert summary["iterations"] == 30 and summary["reason"] is None


def test_resume_continues_the_count(tiny_run):
    settings = dict(TRAIN_EARLY_STOP_PATIENCE=3, **PLATEAU)
    whole, _ = run(tiny_run, RUN_NAME="whole", **settings)
    part, run_dir = run(tiny_run, RUN_NAME="parts", stop_after=12, **settings)
    assert part["status"] == "stopped" and part["stopped_early"] is False
    state = load_checkpoint(run_dir / "ckpt_latest.pt")
    assert state["early_stop"]["bad_evals"] == 1  # eval at step 10
    resumed, _ = run(tiny_run, RUN_NAME="parts", resume=state, run_dir=run_dir, **settings)
    # a fresh count would run to step 30; continuing it stops where the whole run did
    assert whole["iterations"] == resumed["iterations"] == 20
    assert resumed["stopped_early"] is True
