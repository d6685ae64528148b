"""How long a matrix still takes, for `make watch`.

Each run still to train is estimated as the dry run does
(lib/estimate/calibrate.py: calibrated on the completed runs under the
results root, this matrix's own included, as they finish); a running run
needs the rest of its steps at its logged ms/iter, else its estimate less the
time it has run. The runs are then laid out as the matrix starts them: in
order, each on the first place to free up, with as many places as the matrix
runs at once (matrix.json "runs_at_once", written when it starts training;
else the tuning stage's, else PARALLEL_JOBS, at least the runs running now).
The answer is when the last one ends.

A tuning stage (lib/tune/stage.py) comes first: one configuration's study
after another, each in rounds of as many trials as train at once (its
tune/<config>/matrix.json "runs_at_once"), a round ending with its last
trial. A trial is estimated as the dry run does (lib/tune/forecast.py): its
configuration at the budget's steps, start-up included. A pruned trial stops
sooner, which no one knows in advance: every trial still to run counts at its
full length, so the tuning part is an upper bound. The runs start when the
last study ends.
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lib.atomic import read_json_object
from lib.estimate.calibrate import parse_stamp

TO_TRAIN = ("pending", "running")


@dataclass(frozen=True)
class Study:
    """One configuration's study as its records stand."""

    folder: str  # tune/<config>, under the matrix folder
    trials: int | None  # its budget: the trials it runs in all (None: unreadable)
    steps: int  # each trial's
    trial: Any  # one trial's RunEstimate at full length; None: no estimate
    runs: dict[str, dict[str, Any]]  # its matrix.json "runs": the trials asked so far
    told: dict[str, str]  # trial run id -> its state in tuning.json (complete|pruned|fail)
    at_once: int | None  # its matrix.json "runs_at_once": trials asked at once


@dataclass(frozen=True)
class MatrixEta:
    done: int  # completed, failed or diverged (reused runs count as completed)
    total: int
    remaining_s: float | None  # None when some run or trial to train has no estimate
    at_once: int
    basis: str  # what the pending runs' and trials' estimates rest on
    trials_done: int = 0  # over every study
    trials_total: int = 0
    trials_running: int = 0
    tuning_s: float | None = 0.0  # until the last trial ends; None: unknown


def layout(
    running_left: list[float], pending: list[float], at_once: int, start: float = 0.0
) -> float:
    """Seconds until the last run ends: `running_left` already hold places, the
    other places free up at `start`, and `pending` start in order on the first
    place that frees up."""
    places = max(at_once, len(running_left), 1)
    free = sorted(running_left) + [start] * (places - len(running_left))
    heapq.heapify(free)
    end = max([start, *free])
    for seconds in pending:
        begin = heapq.heappop(free)
        heapq.heappush(free, begin + seconds)
        end = max(end, begin + seconds)
    return end


def finished(entry: dict[str, Any], told: str | None) -> bool:
    """A trial its study counts against the budget: complete, pruned, or failed for
    good (diverged, or refused before it trained); the stage retries other failures."""
    state = entry.get("state")
    if state == "diverged" or (state == "failed" and not entry.get("attempts")):
        return True
    if told is not None:
        return told in ("complete", "pruned")
    return state == "completed"  # ended, its study not told yet


@dataclass
class Stage:
    """The tuning stage's trials over every study, and the time until the last ends."""

    seconds: float | None = 0.0  # None: unknown
    done: int = 0
    total: int = 0
    running: int = 0
    bases: set[str] = field(default_factory=set)  # what the trials' estimates rest on
    bound: str = ""  # how the trials still to run are counted


def stage_left(
    studies: Sequence[Study], jobs: int, left: Callable[[str, dict[str, Any], Any], float | None]
) -> Stage:
    """The studies one after another, each in rounds of its places; left(path,
    entry, estimate): a running trial's seconds left, None where unknown."""
    stage = Stage()
    for s in studies:
        running = {r: e for r, e in s.runs.items() if e.get("state") == "running"}
        asked = sum(1 for e in s.runs.values() if e.get("state") == "pending")
        done = sum(1 for r, e in s.runs.items() if finished(e, s.told.get(r)))
        if s.trials is None:  # a configuration this code cannot read: time unknown
            stage.seconds = None
            continue
        to_ask = max(0, s.trials - done - len(running) - asked)
        stage.done, stage.total = stage.done + min(done, s.trials), stage.total + s.trials
        stage.running += len(running)
        lefts = [left(f"{s.folder}/{r}", e, s.trial) for r, e in running.items()]
        if s.trial is not None and (asked or to_ask or running):
            stage.bases.add(s.trial.basis)
        if stage.seconds is None or None in lefts or (s.trial is None and (asked or to_ask)):
            stage.seconds = None
            continue
        seconds = s.trial.seconds if s.trial is not None else 0.0
        places = max(s.at_once or jobs, len(running), 1)
        # the round under way ends with its last trial; then full rounds of the rest
        round_end = layout([x or 0.0 for x in lefts], [seconds] * asked, places)
        stage.seconds += round_end + math.ceil(to_ask / places) * seconds
    if stage.done < stage.total:
        steps = max(s.steps for s in studies)
        stage.bound = f"trials at their full {steps} steps, an upper bound: pruned ones stop sooner"
    return stage


def matrix_eta(
    matrix: dict[str, Any],
    estimate: Callable[[str, dict[str, Any]], Any],
    progress: Callable[[str], dict[str, Any] | None],
    now: float | None = None,
    studies: Sequence[Study] = (),
) -> MatrixEta:
    """The ETA of a matrix record. estimate(run_id, entry): a RunEstimate or None;
    progress(path): the run_progress() of a running run or trial (its path under
    the matrix folder) or None; studies: its tuning stage, in the order it runs."""
    now = time.time() if now is None else now

    def left(path: str, entry: dict[str, Any], est: Any) -> float | None:
        seen = progress(path) or {}
        if "eta_s" in seen:
            return float(seen["eta_s"])
        if est is None:
            return None
        started = parse_stamp(entry.get("started"))
        return max(0.0, est.seconds - (now - started if started else 0.0))

    # the trials' places are the runs' until the runs start and record theirs
    trial_places = next((s.at_once for s in studies if s.at_once), None)
    jobs = int(matrix.get("runs_at_once") or trial_places or matrix.get("parallel_jobs") or 1)
    stage = stage_left(studies, jobs, left)
    bases: set[str] = set()
    runs: dict[str, dict[str, Any]] = matrix.get("runs") or {}
    done = sum(1 for e in runs.values() if e.get("state") not in TO_TRAIN)
    running_left, pending, unknown = [], [], stage.seconds is None
    for run_id, entry in runs.items():
        state = entry.get("state")
        if state not in TO_TRAIN:
            continue
        est = estimate(run_id, entry)
        if est is not None:
            bases.add(est.basis)
        if state == "running":
            x = left(run_id, entry, est)
            unknown |= x is None
            running_left.append(x or 0.0)
        elif est is None:
            unknown = True
        else:
            pending.append(est.seconds)
    at_once = max(jobs, len(running_left), 1)
    remaining = None if unknown else layout(running_left, pending, at_once, stage.seconds or 0.0)
    return MatrixEta(
        done,
        len(runs),
        remaining,
        at_once,
        "; ".join(sorted(bases | stage.bases) + [stage.bound] * bool(stage.bound)),
        stage.done,
        stage.total,
        stage.running,
        stage.seconds,
    )


class Estimates:
    """Each run's RunEstimate from the matrix's base.config and its overrides, and
    its tuning stage's studies; the configurations are loaded once, the estimates
    redone when the set of completed runs under the results root changes."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self._configs: dict[str, Any] = {}
        self._estimates: dict[str, Any] = {}
        self._trials: dict[str, tuple[int | None, int, Any]] = {}  # config -> its _trial()
        self._seen: int | None = None

    def prepare(self) -> None:
        from lib.estimate.calibrate import completed_runs

        self._completed = completed_runs(self.folder.parent)
        if len(self._completed) != self._seen:
            self._seen, self._estimates, self._trials = len(self._completed), {}, {}

    def __call__(self, run_id: str, entry: dict[str, Any]) -> Any:
        if run_id not in self._estimates:
            self._estimates[run_id] = self._estimate(run_id, entry)
        return self._estimates[run_id]

    def _estimate(self, run_id: str, entry: dict[str, Any]) -> Any:
        from lib.config.kconfig import ConfigError
        from lib.config.rules import OwnersMissing
        from lib.config.run_config import load_run_config
        from lib.estimate.calibrate import estimate_run

        try:
            if run_id not in self._configs:
                self._configs[run_id] = load_run_config(
                    list(entry.get("overrides") or []), self.folder / "base.config"
                )
            return estimate_run(self._configs[run_id], self._completed)
        except OwnersMissing:
            raise  # an entry point that skipped lib/cli.py: its bug, not the record's
        except (ConfigError, OSError, ValueError, KeyError, RuntimeError):
            return None  # a record this code cannot read: no estimate, not a crash

    def studies(self, matrix: dict[str, Any]) -> list[Study]:
        """The studies of matrix.json's "tune" (none without a tuning stage), each
        with its trials' records (tune/<config>/matrix.json and tuning.json)."""
        from lib.tune.record import FILE
        from lib.tune.stage import TUNE_DIR

        found = []
        for config_id, cfg in ((matrix.get("tune") or {}).get("configs") or {}).items():
            folder = f"{TUNE_DIR}/{config_id}"
            trials = read_json_object(self.folder / folder / "matrix.json")
            record = read_json_object(self.folder / folder / FILE)
            count, steps, estimate = self._trial(config_id, list(cfg.get("overrides") or []))
            budget = record.get("budget") or {}
            told = {
                Path(t["run_dir"]).name: str(t.get("state"))
                for t in record.get("trials") or []
                if isinstance(t, dict) and t.get("run_dir") and t.get("state") != "running"
            }
            found.append(
                Study(
                    folder,
                    budget.get("trials") or count,  # the stage's own count, once written
                    int(budget.get("steps_per_trial") or steps),
                    estimate,
                    trials.get("runs") or {},
                    told,
                    trials.get("runs_at_once"),
                )
            )
        return found

    def _trial(self, config_id: str, overrides: list[str]) -> tuple[int | None, int, Any]:
        """(the trials its study runs, each one's steps, one trial's RunEstimate)."""
        from lib.config.kconfig import ConfigError
        from lib.config.rules import OwnersMissing
        from lib.config.run_config import load_run_config
        from lib.estimate.calibrate import estimate_run
        from lib.tune.forecast import trial_config

        if config_id not in self._trials:
            path = self.folder / "base.config"
            try:
                run, count = trial_config(load_run_config([], path), overrides, path)
                self._trials[config_id] = (
                    count,
                    run.GPT2_MAX_ITERS,
                    estimate_run(run, self._completed),
                )
            except OwnersMissing:
                raise  # an entry point that skipped lib/cli.py: its bug, not the record's
            except (ConfigError, OSError, ValueError, KeyError, RuntimeError):
                self._trials[config_id] = (None, 0, None)  # unreadable: unknown, not a crash
        return self._trials[config_id]
