"""A tuned matrix's ETA in `make watch` (lib/matrix/eta.py): the trials still to
run, in rounds on the matrix's places, then the runs; on fabricated records."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from lib.config.run_config import load_run_config
from lib.estimate.calibrate import UNCALIBRATED, completed_runs, estimate_run, planned_shape
from lib.matrix.eta import Study, matrix_eta
from lib.matrix.watch import render
from lib.observe.progress import duration

NOW = 1_800_000_000.0
UPPER = "trials at their full 20 steps, an upper bound: pruned ones stop sooner"


class Est:
    def __init__(self, seconds: float, basis: str = UNCALIBRATED):
        self.seconds, self.basis = seconds, basis


def stamp(seconds_before: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(NOW - seconds_before))


def test_trials_still_to_run_come_before_the_runs():
    """Study a: 6 trials, 2 at a time; done: complete, pruned, diverged (the
    failed one is retried); two running. Study b: 4 trials, none asked yet."""
    a = Study(
        "tune/a",
        6,
        20,
        Est(30.0),
        {
            "trial-000": {"state": "completed", "attempts": 1},
            "trial-001": {"state": "completed", "attempts": 1},
            "trial-002": {"state": "failed", "attempts": 1},
            "trial-003": {"state": "diverged", "attempts": 1},
            "trial-004": {"state": "running", "attempts": 1, "started": stamp(5)},
            "trial-005": {"state": "running", "attempts": 1, "started": stamp(10)},
        },
        {"trial-000": "complete", "trial-001": "pruned", "trial-002": "fail", "trial-003": "fail"},
        2,
    )
    b = Study("tune/b", 4, 20, Est(40.0), {}, {}, None)
    matrix = {"parallel_jobs": 0, "runs": {f"r{i}": {"state": "pending"} for i in range(4)}}
    progress = {"tune/a/trial-004": {"eta_s": 12.0}}  # trial-005 logged no step yet
    eta = matrix_eta(matrix, lambda r, e: Est(100.0), progress.get, NOW, [a, b])
    # a: the round under way ends at max(12, 30 - 10) = 20, then 6 - 3 done - 2 running
    # = 1 trial: one more round of 30 s; b: 4 trials in 2 rounds of 40 s
    assert eta.tuning_s == pytest.approx(20 + 30 + 2 * 40)
    # then the 4 runs of 100 s, two at a time (the trials' places): 2 rounds
    assert eta.remaining_s == pytest.approx(130 + 2 * 100)
    assert (eta.trials_done, eta.trials_total, eta.trials_running) == (3, 10, 2)
    assert (eta.done, eta.total, eta.at_once) == (0, 4, 2)
    assert eta.basis == f"{UNCALIBRATED}; {UPPER}"
    # without the stage: the runs alone, one at a time (PARALLEL_JOBS=0 recorded)
    assert matrix_eta(matrix, lambda r, e: Est(100.0), progress.get, NOW).remaining_s == 400
    # a study whose trial has no estimate makes the time unknown
    unknown = Study("tune/b", 4, 20, None, {}, {}, None)
    assert matrix_eta(matrix, lambda r, e: Est(100.0), {}.get, NOW, [unknown]).remaining_s is None


def test_a_finished_stage_adds_nothing():
    done = {f"trial-{i:03d}": {"state": "completed", "attempts": 1} for i in range(3)}
    told = {r: "pruned" for r in done}
    study = Study("tune/a", 3, 20, Est(30.0), done, told, 2)
    matrix = {"runs_at_once": 2, "runs": {"r0": {"state": "pending"}, "r1": {"state": "pending"}}}
    eta = matrix_eta(matrix, lambda r, e: Est(100.0), {}.get, NOW, [study])
    assert (eta.tuning_s, eta.remaining_s, eta.trials_done) == (0.0, 100.0, 3)
    assert eta.basis == UNCALIBRATED


def metrics_for(run, ms: float, iterations: int, evaluations: int) -> dict:
    """A completed run's metrics.json, of `run`'s shape on this machine."""
    model, config, tokens, device, dtype, world, _ = json.loads(planned_shape(run))
    return {
        "status": "completed",
        "model": model,
        "model_config": config,
        "tokens_per_iter": tokens,
        "device_name": device,
        "dtype": dtype,
        "world_size": world,
        "ms_per_iter": ms,
        "iterations": iterations,
        "val_loss": {"iters": list(range(evaluations)), "values": [2.0] * evaluations},
    }


def write_json(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


def test_watch_counts_the_tuning_stage_from_its_records(tiny_run, tmp_path):
    """Two completed 40-step runs calibrate (1 s a step, 60 s a process); the
    matrix tunes one configuration: 5 trials of 20 steps, 2 at a time, 2 done,
    2 running, then its 2 runs."""
    run = tiny_run(
        GPT2_MAX_ITERS=40,
        GPT2_EVAL_INTERVAL=10,
        MATRIX_TUNE="y",
        MATRIX_TUNE_SYMBOLS="LR",
        MATRIX_TUNE_TRIALS=5,
        MATRIX_TUNE_FRACTION=50,
    )
    results = tmp_path / "results"
    done = {"state": "completed", "attempts": 1, "seconds": 60.0, "overrides": []}
    write_json(results / "m0" / "matrix.json", {"runs": {"a": done, "b": done}})
    for r in ("a", "b"):
        write_json(results / "m0" / r / "metrics.json", metrics_for(run, 1000.0, 40, 4))
        (results / "m0" / r / "config.txt").write_text(run.config_text)
    root = results / "m1"
    root.mkdir()
    (root / "base.config").write_text(run.config_text)
    pending = {"state": "pending", "overrides": [], "attempts": 0}
    matrix = {
        "matrix_id": "m1",
        "parallel_jobs": 0,
        "runs": {"c_s1": pending, "c_s2": pending},
        "tune": {"configs": {"c": {"overrides": [], "runs": ["c_s1", "c_s2"]}}},
    }
    write_json(root / "matrix.json", matrix)
    tune = root / "tune" / "c"
    write_json(
        tune / "matrix.json",
        {
            "runs_at_once": 2,
            "runs": {
                "trial-000": {"state": "completed", "attempts": 1},
                "trial-001": {"state": "completed", "attempts": 1},
                "trial-002": {"state": "running", "attempts": 1, "started": stamp(15)},
                "trial-003": {"state": "running", "attempts": 1, "started": stamp(15)},
            },
        },
    )
    write_json(
        tune / "tuning.json",
        {
            "config": "c",
            "budget": {"trials": 5, "steps_per_trial": 20},
            "trials": [
                {"number": 0, "state": "complete", "value": 2.1, "run_dir": "tune/c/trial-000"},
                {"number": 1, "state": "pruned", "value": 2.4, "run_dir": "tune/c/trial-001"},
            ],
            "best": {"value": 2.1, "params": {"LR": 0.003}, "trial": 0},
        },
    )
    (tune / "trial-002").mkdir()
    (tune / "trial-002" / "output.log").write_text(
        "iter 15/20 | loss 2.0000 | ppl 7.4 | lr 1.00e-03 | 1000.0 ms/iter | 256 tok/s\n"
    )
    # a trial: the configuration at 20 steps, as calibrated by the same runs
    trial = load_run_config(
        ["GPT2_MAX_ITERS=20", "MATRIX_TUNE=n", f"TRAIN_SEED={run.TRAIN_SEED}"],
        root / "base.config",
    )
    trial_s = estimate_run(trial, completed_runs(results)).seconds
    assert 20 < trial_s < 50  # 20 steps of 1 s, start-up and evaluations: less than a run
    # trial-002: 5 steps left at 1 s; trial-003: its estimate less its 15 s; then the
    # fifth trial alone; then the 2 runs of 60 s side by side
    tuning_s = max(5.0, trial_s - 15) + trial_s
    lines = render(root, now=NOW).splitlines()
    assert lines[1] == (
        f"  tuning: 2 of 5 trials done, 2 running; 0 of 2 runs done; about "
        f"{duration(tuning_s + 60)} left, {duration(tuning_s)} of it tuning (2 at a time; "
        f"calibrated from 2 runs of this shape on this machine; {UPPER})"
    )
    # the same matrix without its tuning stage: the runs alone, as before
    del matrix["tune"]
    matrix["runs_at_once"] = 2
    write_json(root / "matrix.json", matrix)
    assert render(root, now=NOW).splitlines()[1] == (
        "  0 of 2 runs done; about 1m 00s left (2 at a time; "
        "calibrated from 2 runs of this shape on this machine)"
    )


def test_an_entry_point_without_the_rules_is_an_error_not_a_missing_estimate(
    tiny_run, tmp_path, monkeypatch
):
    """`make watch` once ran without lib/cli.py: every estimate raised OwnersMissing,
    which the guard for unreadable records turned into 'time left unknown'."""
    import lib.estimate.calibrate as calibrate
    from lib.config.rules import OwnersMissing
    from lib.matrix.eta import Estimates

    root = tmp_path / "results" / "m1"
    root.mkdir(parents=True)
    (root / "base.config").write_text(tiny_run().config_text)
    estimates = Estimates(root)
    estimates.prepare()
    pending = {"state": "pending", "overrides": [], "attempts": 0}
    assert estimates("a", pending) is not None  # the rules are registered here

    def unregistered(*args, **kwargs):
        raise OwnersMissing("a configuration was checked before the rules were registered")

    monkeypatch.setattr(calibrate, "estimate_run", unregistered)
    with pytest.raises(OwnersMissing):
        estimates("b", pending)
    monkeypatch.setattr(calibrate, "estimate_run", lambda *a: (_ for _ in ()).throw(OSError()))
    assert estimates("c", pending) is None  # an unreadable record still is no estimate
