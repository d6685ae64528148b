"""matrix.json: every run's state, rewritten atomically on each change.

A matrix folder holds base.config (the .config the matrix was planned from),
matrix.json, and one run folder per run. Run states: pending (not started,
or interrupted and to be resumed from its checkpoint), running, completed,
failed, diverged. A run left "running" by a matrix that was killed is
resumed by `make continue` like a pending one, unless a live process still
owns its folder (lib/run/owner.py): then it is left to that process.
A run's seed is in its overrides: MATRIX_SEEDS adds TRAIN_SEED=<seed> to each
run's (and _s<seed> to its id), so no field of its own is needed and older
matrix.json files read the same.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import threading
import time
from pathlib import Path
from typing import Any

from lib.atomic import write_json_atomic
from lib.run import owner
from lib.run.record_model import MatrixFields, check_matrix_run, problems_of
from lib.run.rundir import is_name

STATES = ("pending", "running", "completed", "failed", "diverged")
FILE = "matrix.json"


class MatrixError(Exception):
    pass


def is_matrix(path: Path) -> bool:
    return (Path(path) / FILE).is_file()


def run_id_problems(run_id: str) -> list[str]:
    """A run id names a folder of the matrix, or one below it (an older engine listed
    tuning trials as tune/<configuration>/trial-N): never absolute, never through "..",
    so an edited matrix.json cannot point a run, or the results, at a folder elsewhere."""
    if all(is_name(part) for part in run_id.split("/")):
        return []
    return [f"run {run_id!r} is not a folder inside the matrix"]


def _problems(path: Path, data: dict[str, Any]) -> list[str]:
    problems = [p for run_id in data["runs"] for p in run_id_problems(run_id)]
    for run_id, entry in data["runs"].items():
        problems += check_matrix_run(path, run_id, entry)
    return problems + problems_of(MatrixFields, path, data)


class MatrixState:
    """The in-memory matrix.json; every update is written through at once."""

    def __init__(self, root: Path, data: dict[str, Any]):
        self.root = Path(root)
        self.data = data
        self._lock = threading.Lock()  # parallel runs report from worker threads

    @classmethod
    def create(
        cls,
        root: Path,
        matrix_id: str,
        runs: dict[str, list[str]],
        cli_overrides: dict[str, str],
        parallel_jobs: int,
    ) -> MatrixState:
        data = {
            "matrix_id": matrix_id,
            "created": time.strftime("%Y-%m-%d %H:%M:%S"),
            "base_config": "base.config",
            "overrides": cli_overrides,
            "parallel_jobs": parallel_jobs,
            "runs": {
                run_id: {"state": "pending", "overrides": args, "attempts": 0}
                for run_id, args in runs.items()
            },
        }
        state = cls(root, data)
        state.save()
        return state

    @classmethod
    def load(cls, root: Path, entries: bool = True) -> MatrixState:
        """matrix.json, refused when a run's state is unknown and, with `entries`, when
        any field the matrix's runs are trained from is wrong (lib/run/record_model.py:
        MatrixRun, MatrixFields) or a run id is no folder inside the matrix (an edited
        file must not point a run at a folder elsewhere). The results pass
        entries=False: they show such a run as invalid and the others as they are."""
        path = Path(root) / FILE
        try:
            data = json.loads(path.read_text())
            runs = data["runs"]
            bad = [r for r, v in runs.items() if v.get("state") not in STATES]
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
            raise MatrixError(
                f"{path} is not a readable matrix record ({err}); nothing was changed"
            ) from None
        if bad:
            raise MatrixError(f"{path}: runs with an unknown state: {', '.join(bad)}")
        if entries and (problems := _problems(path, data)):
            raise MatrixError(
                f"{path} cannot be resumed as it is: {'; '.join(problems)}. Nothing was "
                f"changed; put back the file the matrix wrote (each run's own settings "
                f"are also in its folder's config.txt)"
            )
        return cls(root, data)

    @property
    def runs(self) -> dict[str, dict[str, Any]]:
        return self.data["runs"]

    def save(self) -> None:
        with self._locked():
            write_json_atomic(self.root / FILE, self.data)

    @contextlib.contextmanager
    def _locked(self):
        """This process's threads, and other processes (cluster jobs of the same
        matrix on a shared filesystem), update matrix.json one at a time."""
        with self._lock, open(self.root / ".matrix.lock", "a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def update(self, run_id: str, **fields: Any) -> None:
        """Change one run's entry; other runs' entries are re-read first, since
        other processes may have changed them."""
        with self._locked():
            try:
                self.data["runs"] = json.loads((self.root / FILE).read_text())["runs"]
            except (OSError, ValueError, KeyError):
                pass  # keep ours: a damaged file is rewritten whole below
            self.runs[run_id].update(fields)
            write_json_atomic(self.root / FILE, self.data)

    def counts(self) -> dict[str, int]:
        counts = {s: 0 for s in STATES}
        for run in self.runs.values():
            counts[run["state"]] += 1
        return counts

    def live(self) -> dict[str, dict[str, Any]]:
        """Runs a live process trains now (a cluster job, a `make continue` of
        that run alone), with their owner's record (lib/run/owner.py)."""
        found = {r: owner.owner(self.root / r) for r in self.runs if (self.root / r).is_dir()}
        return {r: holder for r, holder in found.items() if holder is not None}

    def to_run(self, retry_failed: bool = False, live: dict[str, Any] | None = None) -> list[str]:
        """Runs `make continue` trains: pending ones, "running" ones whose process
        is gone (interrupted), and failed or diverged ones when asked to retry
        them; never one in `live` (see live())."""
        live = self.live() if live is None else live
        wanted = {"pending", "running"} | ({"failed", "diverged"} if retry_failed else set())
        return [r for r, v in self.runs.items() if v["state"] in wanted and r not in live]
