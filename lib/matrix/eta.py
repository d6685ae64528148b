"""How long a matrix still takes, for `make watch`.

Each run still to train is estimated as the dry run does
(lib/estimate/calibrate.py: calibrated on the completed runs under the
results root, this matrix's own included, as they finish); a running run
needs the rest of its steps at its logged ms/iter, else its estimate less the
time it has run. The runs are then laid out as the matrix starts them: in
order, each on the first place to free up, with as many places as the matrix
runs at once (matrix.json "runs_at_once", written when it starts training;
else PARALLEL_JOBS, at least the runs running now). The answer is when the
last one ends.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lib.estimate.calibrate import parse_stamp

TO_TRAIN = ("pending", "running")


@dataclass(frozen=True)
class MatrixEta:
    done: int  # completed, failed or diverged (reused runs count as completed)
    total: int
    remaining_s: float | None  # None when some run to train has no estimate
    at_once: int
    basis: str  # what the pending runs' estimates rest on


def layout(running_left: list[float], pending: list[float], at_once: int) -> float:
    """Seconds until the last run ends: `running_left` already hold places,
    `pending` start in order on the first place that frees up."""
    places = max(at_once, len(running_left), 1)
    free = sorted(running_left) + [0.0] * (places - len(running_left))
    heapq.heapify(free)
    end = max(free, default=0.0)
    for seconds in pending:
        start = heapq.heappop(free)
        heapq.heappush(free, start + seconds)
        end = max(end, start + seconds)
    return end


def matrix_eta(
    matrix: dict[str, Any],
    estimate: Callable[[str, dict[str, Any]], Any],
    progress: Callable[[str], dict[str, Any] | None],
    now: float | None = None,
) -> MatrixEta:
    """The ETA of a matrix record. estimate(run_id, entry): a RunEstimate or None;
    progress(run_id): a running run's run_progress() or None."""
    now = time.time() if now is None else now
    runs: dict[str, dict[str, Any]] = matrix.get("runs") or {}
    done = sum(1 for e in runs.values() if e.get("state") not in TO_TRAIN)
    running_left, pending, unknown, bases = [], [], False, set()
    for run_id, entry in runs.items():
        state = entry.get("state")
        if state not in TO_TRAIN:
            continue
        est = estimate(run_id, entry)
        if est is not None:
            bases.add(est.basis)
        if state == "running":
            seen = progress(run_id) or {}
            started = parse_stamp(entry.get("started"))
            if "eta_s" in seen:
                running_left.append(seen["eta_s"])
            elif est is not None:
                running_left.append(max(0.0, est.seconds - (now - started if started else 0.0)))
            else:
                unknown = True
                running_left.append(0.0)
        elif est is None:
            unknown = True
        else:
            pending.append(est.seconds)
    jobs = matrix.get("runs_at_once") or matrix.get("parallel_jobs") or 1
    at_once = max(int(jobs), len(running_left), 1)
    remaining = None if unknown else layout(running_left, pending, at_once)
    return MatrixEta(done, len(runs), remaining, at_once, "; ".join(sorted(bases)))


class Estimates:
    """Each run's RunEstimate from the matrix's base.config and its overrides;
    the configurations are loaded once, the estimates redone when the set of
    completed runs under the results root changes."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self._configs: dict[str, Any] = {}
        self._estimates: dict[str, Any] = {}
        self._seen: int | None = None

    def prepare(self) -> None:
        from lib.estimate.calibrate import completed_runs

        self._completed = completed_runs(self.folder.parent)
        if len(self._completed) != self._seen:
            self._seen, self._estimates = len(self._completed), {}

    def __call__(self, run_id: str, entry: dict[str, Any]) -> Any:
        if run_id not in self._estimates:
            self._estimates[run_id] = self._estimate(run_id, entry)
        return self._estimates[run_id]

    def _estimate(self, run_id: str, entry: dict[str, Any]) -> Any:
        from lib.config.kconfig import ConfigError
        from lib.config.run_config import load_run_config
        from lib.estimate.calibrate import estimate_run

        try:
            if run_id not in self._configs:
                self._configs[run_id] = load_run_config(
                    list(entry.get("overrides") or []), self.folder / "base.config"
                )
            return estimate_run(self._configs[run_id], self._completed)
        except (ConfigError, OSError, ValueError, KeyError, RuntimeError):
            return None  # a record this code cannot read: no estimate, not a crash
