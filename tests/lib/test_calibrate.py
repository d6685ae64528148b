"""Whole-run time estimates calibrated on completed runs (lib/estimate/calibrate.py)
and a matrix's ETA in `make watch` (lib/matrix/eta.py), on synthetic run records:
metrics.json and matrix.json as the trainer and the matrix write them."""

from __future__ import annotations

import json
import statistics
import time
from dataclasses import asdict
from pathlib import Path

import pytest

from lib.data.vocab import configured_vocab
from lib.estimate.calibrate import (
    STARTUP_S,
    UNCALIBRATED,
    completed_runs,
    estimate_run,
    process_seconds,
)
from lib.estimate.memory import configured_device, model_counts
from lib.estimate.timing import breakdown
from lib.matrix.eta import layout, matrix_eta
from lib.matrix.watch import render

NOW = 1_800_000_000.0


def metrics_of(run, ms: float, iterations: int, evaluations: int, **over) -> dict:
    """What the trainer writes for a completed run of `run`'s shape on this machine."""
    cfg, _ = model_counts(run, configured_vocab(run.data))
    info = configured_device(run)
    return {
        "status": "completed",
        "model": run.MODEL,
        "model_config": asdict(cfg),
        "tokens_per_iter": run.derived()["tokens_per_iter"],
        "device_name": info.name,
        "dtype": "fp32",
        "world_size": 1,
        "ms_per_iter": ms,
        "iterations": iterations,
        "val_loss": {"iters": list(range(evaluations)), "values": [2.0] * evaluations},
        **over,
    }


def write_matrix(root: Path, run, runs: dict[str, tuple[dict, dict]]) -> Path:
    """A matrix folder: matrix.json entries and each run's metrics.json and config.txt."""
    root.mkdir(parents=True)
    (root / "base.config").write_text(run.config_text)
    for run_id, (_, metrics) in runs.items():
        (root / run_id).mkdir()
        (root / run_id / "config.txt").write_text(run.config_text)
        if metrics:
            (root / run_id / "metrics.json").write_text(json.dumps(metrics))
    (root / "matrix.json").write_text(
        json.dumps({"matrix_id": root.name, "runs": {r: entry for r, (entry, _) in runs.items()}})
    )
    return root


def test_without_completed_runs_the_flop_rate_plus_an_assumed_start_up(tiny_run, tmp_path):
    run = tiny_run(GPT2_MAX_ITERS=40, GPT2_EVAL_INTERVAL=20)
    est = estimate_run(run, completed_runs(tmp_path / "results"))
    parts = breakdown(run)
    assert est.basis == UNCALIBRATED and est.calibrated == 0
    assert est.seconds == pytest.approx(parts.total + STARTUP_S["cpu"])
    assert parts.steps == 40 and parts.evaluations == 2


def test_completed_runs_of_the_same_shape_calibrate_step_and_fixed_cost(tiny_run, tmp_path):
    run = tiny_run(GPT2_MAX_ITERS=40, GPT2_EVAL_INTERVAL=20)
    ms = {"a": 200.0, "b": 250.0, "c": 400.0}
    processes = {"a": 70.0, "b": 80.0, "c": 130.0}
    write_matrix(
        tmp_path / "results" / "m1",
        run,
        {
            r: (
                {"state": "completed", "attempts": 1, "seconds": processes[r]},
                metrics_of(run, ms[r], 100, 5),
            )
            for r in ms
        },
    )
    est = estimate_run(run, completed_runs(tmp_path / "results"))
    parts = breakdown(run)
    step = 0.25  # the median of 0.2, 0.25 and 0.4 s
    eval_s = parts.eval_s * step / parts.step_s
    fixed = statistics.median(processes[r] - 100 * ms[r] / 1000 - 5 * eval_s for r in ms)
    assert fixed == pytest.approx(55.0 - 5 * eval_s)  # b's: 50, 55, 90 less the evaluations
    assert est.seconds == pytest.approx(fixed + 40 * step + 2 * eval_s)
    assert est.basis == "calibrated from 3 runs of this shape on this machine"
    assert est.calibrated == 3
    # far from the uncalibrated figure: the synthetic machine is much slower
    assert est.seconds > 2 * estimate_run(run, []).seconds


def test_other_shapes_unfinished_and_resumed_runs_do_not_calibrate(tiny_run, tmp_path):
    run = tiny_run(GPT2_MAX_ITERS=40, GPT2_EVAL_INTERVAL=20)
    wider = tiny_run(GPT2_MAX_ITERS=40, GPT2_EVAL_INTERVAL=20, GPT2_N_EMBD=64)
    done = {"state": "completed", "attempts": 1, "seconds": 500.0}
    write_matrix(
        tmp_path / "results" / "m1",
        run,
        {
            "wider": (done, metrics_of(wider, 900.0, 100, 5)),
            "elsewhere": (done, metrics_of(run, 900.0, 100, 5, device_name="another CPU")),
            "failed": (
                {**done, "state": "failed"},
                metrics_of(run, 900.0, 100, 5, status="failed"),
            ),
            # resumed: its step time counts, its process time covers one attempt only
            "resumed": ({**done, "attempts": 2}, metrics_of(run, 300.0, 100, 5)),
        },
    )
    est = estimate_run(run, completed_runs(tmp_path / "results"))
    parts = breakdown(run)
    eval_s = parts.eval_s * 0.3 / parts.step_s
    assert est.basis == "step time from 1 run of this shape on this machine, start-up assumed"
    assert est.seconds == pytest.approx(STARTUP_S["cpu"] + 40 * 0.3 + 2 * eval_s)


def test_process_time_from_the_stamps_of_older_matrix_records():
    entry = {"attempts": 1, "started": "2026-11-26 16:21:13", "ended": "2026-11-26 16:22:38"}
    assert process_seconds(entry) == 85.0
    assert process_seconds({**entry, "seconds": 84.2}) == 84.2
    assert process_seconds({**entry, "reused_from": "m0/r"}) is None
    assert process_seconds({**entry, "ended": None}) is None


def test_layout_fills_places_in_order():
    # two places: one busy for 30 s; runs of 100 s start at 0, 30 and 100
    assert layout([30.0], [100.0, 100.0, 100.0], 2) == 200.0
    assert layout([30.0], [100.0, 100.0, 100.0], 1) == 330.0
    assert layout([50.0, 20.0], [], 1) == 50.0  # both running: they hold places anyway
    assert layout([], [], 4) == 0.0


class Est:
    def __init__(self, seconds: float, basis: str = UNCALIBRATED):
        self.seconds, self.basis = seconds, basis


def test_matrix_eta_counts_running_progress_and_parallel_places():
    matrix = {
        "runs_at_once": 2,
        "runs": {
            "a": {"state": "completed"},
            "b": {"state": "failed"},
            "c": {"state": "running", "started": "2026-11-26 16:00:00"},
            "d": {"state": "running", "started": "2026-11-26 16:00:00"},
            "e": {"state": "pending"},
            "f": {"state": "pending"},
        },
    }
    estimates = {"c": Est(100.0), "d": Est(100.0), "e": Est(60.0), "f": Est(80.0)}
    progress = {"c": {"eta_s": 10.0}, "d": {}}  # d has logged no step yet
    started = time.mktime(time.strptime("2026-11-26 16:00:00", "%Y-%m-%d %H:%M:%S"))
    eta = matrix_eta(matrix, lambda r, e: estimates.get(r), progress.get, now=started + 30)
    # c: 10 s left; d: 100 - 30 = 70 s; e starts at 10 (ends 70), f at 70 (ends 150)
    assert (eta.done, eta.total, eta.at_once) == (2, 6, 2)
    assert eta.remaining_s == pytest.approx(150.0)
    assert eta.basis == UNCALIBRATED
    missing = matrix_eta(
        matrix, lambda r, e: None if r == "f" else estimates[r], progress.get, now=started + 30
    )
    assert missing.remaining_s is None


def test_watch_shows_the_matrix_eta_from_its_records(tiny_run, tmp_path):
    """A real base.config and overrides, two completed runs that calibrate, one
    running, two pending, two at a time."""
    run = tiny_run(GPT2_MAX_ITERS=40, GPT2_EVAL_INTERVAL=20)
    done = {"state": "completed", "attempts": 1, "seconds": 60.0, "overrides": []}
    root = write_matrix(
        tmp_path / "results" / "m1",
        run,
        {
            "r1": (done, metrics_of(run, 1000.0, 40, 2)),
            "r2": (done, metrics_of(run, 1000.0, 40, 2)),
            "r3": ({"state": "running", "overrides": []}, {}),
            "r4": ({"state": "pending", "overrides": []}, {}),
            "r5": ({"state": "pending", "overrides": []}, {}),
        },
    )
    matrix = json.loads((root / "matrix.json").read_text())
    matrix["runs_at_once"] = 2
    (root / "matrix.json").write_text(json.dumps(matrix))
    (root / "r3" / "output.log").write_text(
        "iter 30/40 | loss 2.0000 | ppl 7.4 | lr 1.00e-03 | 1000.0 ms/iter | 256 tok/s\n"
    )
    lines = render(root, now=NOW).splitlines()
    # each pending run takes its calibrated 60 s (40 steps of 1 s + 2 evaluations + the
    # rest of the measured process); r3 needs 10 s more: r4 runs 0-60, r5 10-70
    assert lines[1] == (
        "  2 of 5 runs done; about 1m 10s left (2 at a time; calibrated "
        "from 2 runs of this shape on this machine)"
    )


def test_a_tuned_matrix_calibrates_on_its_completed_and_pruned_trials(tiny_run, tmp_path):
    """Trials under <matrix>/tune/<configuration>/ are runs of the same shape:
    completed and pruned ones calibrate at their measured ms/iter and the steps
    they did run; failed, diverged and reused (linked) ones do not."""
    from lib.tune.stage import TUNE_DIR

    run = tiny_run(GPT2_MAX_ITERS=40, GPT2_EVAL_INTERVAL=20)
    trial = tiny_run(GPT2_MAX_ITERS=20, GPT2_EVAL_INTERVAL=10)  # shorter, the same shape
    root = write_matrix(
        tmp_path / "results" / "m1", run, {"c_s1": ({"state": "pending", "attempts": 0}, {})}
    )
    done = {"state": "completed", "attempts": 1}
    # (ms/iter, steps run, evaluations, process seconds)
    timed = {"trial-000": (500.0, 20, 2, 35.0), "trial-002": (600.0, 20, 2, 50.0)}
    pruned = (700.0, 10, 1, 35.0)  # stopped by the study at its first evaluation
    write_matrix(
        root / TUNE_DIR / "c",
        trial,
        {
            **{
                t: ({**done, "seconds": s}, metrics_of(trial, ms, n, e))
                for t, (ms, n, e, s) in timed.items()
            },
            "trial-001": (
                {**done, "seconds": pruned[3]},
                metrics_of(trial, *pruned[:3], pruned=True, pruned_at=10),
            ),
            "trial-003": (
                {**done, "state": "failed", "seconds": 90.0},
                metrics_of(trial, 5000.0, 20, 2, status="failed"),
            ),
            # its run wrote a completed record, then the process failed
            "trial-004": (
                {**done, "state": "failed", "seconds": 95.0},
                metrics_of(trial, 9000.0, 20, 2),
            ),
            "trial-005": (
                {**done, "state": "diverged", "seconds": 20.0},
                metrics_of(trial, 8000.0, 7, 0, status="diverged"),
            ),
        },
    )
    (root / TUNE_DIR / "c" / "trial-006").symlink_to("trial-000")  # reused: counted once
    matrix = json.loads((root / TUNE_DIR / "c" / "matrix.json").read_text())
    matrix["runs"]["trial-006"] = {**done, "seconds": 1.0, "reused_from": "m1/tune/c/trial-000"}
    (root / TUNE_DIR / "c" / "matrix.json").write_text(json.dumps(matrix))

    parts = breakdown(run)
    points = [*timed.values(), pruned]

    def expected(points):
        step = statistics.median(ms / 1000 for ms, _, _, _ in points)
        eval_s = parts.eval_s * step / parts.step_s
        fixed = statistics.median(s - n * ms / 1000 - e * eval_s for ms, n, e, s in points)
        return fixed + 40 * step + 2 * eval_s

    est = estimate_run(run, completed_runs(tmp_path / "results"))
    assert est.basis == "calibrated from 3 trials of this shape on this machine"
    assert est.calibrated == 3
    # step: the median of 0.5, 0.6 and 0.7 s; fixed cost: the pruned trial's 35 s less
    # the 10 steps it ran and its one evaluation, the median of 25, 28 and 38 s less theirs
    assert est.seconds == pytest.approx(expected(points))
    eval_s = parts.eval_s * 0.6 / parts.step_s
    assert est.seconds == pytest.approx((35.0 - 7.0 - eval_s) + 40 * 0.6 + 2 * eval_s)
    assert est.seconds > 2 * estimate_run(run, []).seconds

    # once a final run of the matrix completes, it counts beside the trials
    final = (800.0, 40, 2, 60.0)
    write_matrix(
        tmp_path / "results" / "m2",
        run,
        {"r": ({**done, "seconds": final[3]}, metrics_of(run, *final[:3]))},
    )
    est = estimate_run(run, completed_runs(tmp_path / "results"))
    assert est.basis == "calibrated from 1 run and 3 trials of this shape on this machine"
    assert est.seconds == pytest.approx(expected([*points, final]))
