"""Runs a matrix does not train twice: an earlier completed run with the same fingerprint.

Before a matrix or sweep trains a run, it looks under the results root (every
single run, and every run of every matrix and sweep) for a run whose
metrics.json records the same fingerprint (lib/run/fingerprint.py). If one is
found, the run's folder becomes a symlink to it and matrix.json records its
state as completed with "reused_from" (its path under the results root), and
no process starts: the dry run's plan, the final count and `make results`
show it as reused. Never reused: a run whose metrics.json says anything but
completed (failed, diverged, stopped, still running), one its matrix records
as anything but completed, one trained from a working tree with uncommitted
changes, a folder `make test-rerun` set aside (<id>.prev-<time>) and a link
(a reused run is found through its original). Nothing is reused while this
tree has uncommitted changes, nor into a folder where training has begun
(it is resumed instead). REUSE=n (MATRIX_REUSE) turns it off;
`make test-rerun` always trains. A run whose match lacks outputs the request
asks for beyond the fingerprint (lib/jobs/outputs.py) gains them from the
match's checkpoint, or is trained again where only training makes them.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from lib.atomic import read_json_object
from lib.jobs import outputs
from lib.jobs.state import FILE as MATRIX_FILE
from lib.jobs.state import MatrixState
from lib.run import fingerprint as fp

if TYPE_CHECKING:
    from lib.config.run_config import RunConfig

DIRTY = (
    "reuse is off: the working tree has uncommitted changes (`git status`), so no "
    "fingerprint says what code trains; commit them to reuse earlier runs"
)


@dataclass(frozen=True)
class Match:
    """An earlier completed run with a planned run's fingerprint."""

    source: Path  # its folder
    name: str  # its path under the results root
    hash: str
    wall_time_s: float | None
    owed: outputs.Owed = outputs.Owed()  # what the new request asks for that it lacks


def _folders(results: Path) -> Iterator[tuple[Path, str | None]]:
    """Run folders under results with the state their matrix records (None: a single run)."""

    def real(p: Path) -> bool:
        return (
            p.is_dir()
            and not p.is_symlink()
            and ".prev-" not in p.name
            and not p.name.startswith(".")
        )

    try:
        tops = sorted(p for p in results.iterdir() if real(p))
    except OSError:
        return
    for top in tops:
        if (top / MATRIX_FILE).is_file():
            # A matrix's runs, and its tuning trials (tune/<configuration>/, lib/tune/).
            tune = top / "tune"
            studies = sorted(tune.glob(f"*/{MATRIX_FILE}")) if tune.is_dir() else []
            for where in [top] + [m.parent for m in studies]:
                runs = read_json_object(where / MATRIX_FILE).get("runs") or {}
                for run_id, entry in runs.items():
                    if isinstance(entry, dict) and real(where / run_id):
                        yield where / run_id, entry.get("state")
        elif (top / "metrics.json").is_file():
            yield top, None


def completed(results: Path) -> dict[str, Match]:
    """Fingerprint hash -> the newest completed, reusable run holding it."""
    found: dict[str, tuple[float, Match]] = {}
    for folder, state in _folders(results):
        metrics = read_json_object(folder / "metrics.json")
        record = metrics.get("fingerprint")
        if (
            state not in (None, "completed")
            or metrics.get("status") != "completed"
            or metrics.get("pruned")  # a tuning trial its study stopped early
            or not isinstance(record, dict)
            or not isinstance(record.get("hash"), str)
            or not isinstance(record.get("code"), dict)
            or fp.is_dirty(record["code"])
        ):
            continue
        try:
            when = (folder / "metrics.json").stat().st_mtime
        except OSError:
            continue
        wall = metrics.get("wall_time_s")
        match = Match(
            folder,
            os.path.relpath(folder, results),
            record["hash"],
            wall if isinstance(wall, (int, float)) else None,
        )
        if record["hash"] not in found or when > found[record["hash"]][0]:
            found[record["hash"]] = (when, match)
    return {h: m for h, (_, m) in found.items()}


def find(runs: dict[str, RunConfig], results: Path) -> tuple[dict[str, Match], str | None]:
    """(run id -> the earlier run it reuses, a note on runs that could not be
    checked or None). A run with REUSE=n is trained."""
    wanted = {r: run for r, run in runs.items() if run.MATRIX_REUSE}
    if not wanted:
        return {}, None
    code = fp.code_version()
    if fp.is_dirty(code):
        return {}, DIRTY
    earlier = completed(results)
    if not earlier:
        return {}, None
    out, unprepared, retrain = {}, 0, []
    for run_id, run in wanted.items():
        record = fp.fingerprint(run, code)
        unprepared += record is None
        if record is not None and record["hash"] in earlier:
            match = earlier[record["hash"]]
            owed = outputs.owed(run, match.source)
            if owed.retrain:
                retrain.append(f"reuse: {run_id} is {owed.describe()} ({match.name})")
            else:
                out[run_id] = replace(match, owed=owed)
    notes = retrain + (
        [
            f"reuse: {unprepared} run(s) not checked, their data is not prepared "
            f"yet (`make prepare`; `make test-matrix` prepares it first)"
        ]
        if unprepared
        else []
    )
    return out, "\n".join(notes) or None


FRESH = ("config.txt", "slurm.sh")  # what a matrix writes into a run folder before training


def _untouched(state: MatrixState, run_id: str) -> bool:
    """Never started nor submitted: a queued cluster job would train through the link."""
    folder, entry = state.root / run_id, state.runs[run_id]
    return (
        folder.is_dir()
        and not folder.is_symlink()
        and not entry.get("attempts")
        and not entry.get("slurm_job")
        and {p.name for p in folder.iterdir()} <= set(FRESH)
    )


def link(state: MatrixState, run_id: str, match: Match) -> None:
    """Replace the run's fresh folder by a symlink to the match; record it."""
    folder = state.root / run_id
    for name in FRESH:
        (folder / name).unlink(missing_ok=True)
    folder.rmdir()
    folder.symlink_to(os.path.relpath(match.source, state.root))
    iterations = read_json_object(match.source / "metrics.json").get("iterations")
    state.update(
        run_id,
        state="completed",
        reused_from=match.name,
        fingerprint=match.hash,
        iterations=iterations,
        error=None,
        ended=time.strftime("%Y-%m-%d %H:%M:%S"),
    )


def apply(
    state: MatrixState,
    configs: dict[str, RunConfig],
    run_ids: list[str],
    log: Callable[[str], None] = print,
) -> list[str]:
    """Link every run of run_ids that an earlier run makes unnecessary; the rest,
    to train. A run that has begun is resumed instead."""
    fresh = {r: configs[r] for r in run_ids if _untouched(state, r)}
    matches, note = find(fresh, state.root.parent)
    if note:
        log(f"[matrix] {note}")
    for run_id, match in matches.items():
        link(state, run_id, match)
        log(
            f"[matrix] {run_id}: reused {match.name} (same fingerprint {match.hash[:12]}); "
            f"REUSE=n trains it again"
        )
    for run_id, match in matches.items():
        if match.owed.produce:
            complete(state, run_id, match, log)
    return [r for r in run_ids if r not in matches]


def complete(state: MatrixState, run_id: str, match: Match, log: Callable[[str], None]) -> None:
    """Make what the reused run lacks (outputs.py); a failure is recorded and
    reported, the run stays reused (its training is done either way)."""
    what = match.owed.produce
    log(f"[matrix] {run_id}: adding {match.owed.describe()[2:]}")
    code, tail = outputs.run_process(state.root / run_id, what)
    if code == 0:
        state.update(run_id, added=list(what), added_error=None)
        log(f"[matrix] {run_id}: added {outputs.names(what)} to {match.name}")
    else:
        state.update(run_id, added=[], added_error=tail)
        log(f"[matrix] {run_id}: could not add {outputs.names(what)} (exit {code}):\n{tail}")


def reused(state: MatrixState) -> int:
    return sum(1 for entry in state.runs.values() if entry.get("reused_from"))
