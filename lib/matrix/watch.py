"""Live state of a test matrix or a run, for `make watch` (scripts/watch.py).

A matrix is a folder holding matrix.json, whose "runs" map run ids to
{"state": "pending|running|completed|failed|diverged", ...}; running runs are
shown with their own progress (lib/observe/progress.py), and the whole matrix
with its runs done and the time the rest still takes (lib/matrix/eta.py), a
tuning stage's trials still to run included; each study below them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lib.atomic import read_json_object
from lib.matrix.eta import Estimates, matrix_eta
from lib.observe.progress import duration, progress_line, render_run, run_progress
from lib.plural import counted

STATES = ("running", "pending", "completed", "failed", "diverged")


def _matrix_run_dir(folder: Path, run_id: str, entry: dict[str, Any]) -> Path | None:
    candidates = [entry.get("run_dir"), folder / run_id, folder.parent / run_id]
    for c in candidates:
        if c and (Path(c) / "output.log").exists():
            return Path(c)
    return None


_ESTIMATES: dict[Path, Any] = {}  # matrix folder -> its runs' estimates, across refreshes


def eta_line(folder: Path, matrix: dict[str, Any], now: float | None = None) -> str:
    """ "3 of 5 runs done; about 4m 10s left (2 at a time; <what the estimates rest on>)";
    while a tuning stage has trials to run, "tuning: 7 of 20 trials done, 2 running; "
    first and the time left includes them."""
    folder = Path(folder).resolve()
    estimates = _ESTIMATES.setdefault(folder, Estimates(folder))
    estimates.prepare()

    def progress(path: str) -> dict[str, Any] | None:  # a run's id, or tune/<config>/<trial>
        run_dir = _matrix_run_dir(folder, path, (matrix.get("runs") or {}).get(path) or {})
        return run_progress(run_dir, now) if run_dir is not None else None

    eta = matrix_eta(matrix, estimates, progress, now, estimates.studies(matrix))
    done = f"{eta.done} of {counted(eta.total, 'run')} done"
    tuning = eta.trials_done < eta.trials_total
    if tuning:
        running = f", {eta.trials_running} running" if eta.trials_running else ""
        trials = f"{eta.trials_done} of {counted(eta.trials_total, 'trial')} done{running}"
        done = f"tuning: {trials}; {done}"
    if eta.done == eta.total:
        return done
    if eta.remaining_s is None:
        what = "runs or trials" if tuning else "runs"
        return f"{done}; time left unknown (no estimate for some {what})"
    basis = f"; {eta.basis}" if eta.basis else ""
    of_it = f", {duration(eta.tuning_s)} of it tuning" if tuning and eta.tuning_s else ""
    left = f"about {duration(eta.remaining_s)} left{of_it}"
    return f"{done}; {left} ({eta.at_once} at a time{basis})"


def render_matrix(folder: Path, now: float | None = None) -> str:
    matrix = read_json_object(Path(folder) / "matrix.json")
    runs: dict[str, dict[str, Any]] = matrix.get("runs") or {}
    counts = {s: sum(1 for r in runs.values() if r.get("state") == s) for s in STATES}
    head = ", ".join(f"{n} {s}" for s, n in counts.items() if n)
    lines = [
        f"matrix {matrix.get('matrix_id', Path(folder).name)}: {head or 'no runs'} "
        f"({counted(len(runs), 'run')})"
    ]
    if runs:
        lines.append("  " + eta_line(folder, matrix, now))
    width = max((len(r) for r in runs), default=0)
    for run_id, entry in runs.items():
        state = entry.get("state", "?")
        if state == "completed" and entry.get("reused_from"):
            state = "reused"  # linked to an earlier identical run, not trained here
        detail = ""
        run_dir = _matrix_run_dir(Path(folder), run_id, entry) if state == "running" else None
        if run_dir is not None:
            detail = progress_line(run_progress(run_dir, now))
        elif entry.get("best_val_loss") is not None:
            detail = f"best val loss {entry['best_val_loss']:.4f}"
        lines.append(f"  {state:<9}  {run_id:<{width}}  {detail}".rstrip())
    return "\n".join(lines + tuning_lines(Path(folder), now))


def tuning_lines(folder: Path, now: float | None = None) -> list[str]:
    """A tuning stage's studies (lib/tune/record.py): trials done, pruned and
    failed of the budget, the best so far, and the running trials' progress."""
    lines = []
    for path in sorted(folder.glob("tune/*/tuning.json")):
        rec = read_json_object(path)
        trials = rec.get("trials") or []
        n = {
            s: sum(1 for t in trials if t.get("state") == s) for s in ("complete", "pruned", "fail")
        }
        best = rec.get("best") or {}
        where = " ".join(f"{k}={v:.4g}" for k, v in (best.get("params") or {}).items())
        total = (rec.get("budget") or {}).get("trials", "?")
        lines.append(
            f"  tune {rec.get('config', path.parent.name)}: {n['complete'] + n['pruned']} of "
            f"{total} trials done ({n['pruned']} pruned, {n['fail']} failed)"
            + (f"; best {best['value']:.4f} at {where}" if best.get("value") is not None else "")
        )
        trial_runs = read_json_object(path.parent / "matrix.json").get("runs") or {}
        for run_id, entry in trial_runs.items():
            run_dir = path.parent / run_id
            if entry.get("state") == "running" and (run_dir / "output.log").exists():
                lines.append(f"    running  {run_id}  {progress_line(run_progress(run_dir, now))}")
    return lines


def render(path: Path, now: float | None = None) -> str:
    """The view of whatever path is: a matrix folder or a run folder."""
    path = Path(path)
    if (path / "matrix.json").is_file():
        return render_matrix(path, now)
    if (path / "output.log").is_file() or (path / "metrics.json").is_file():
        return render_run(path, now)
    return f"{path}: no run or matrix there yet (start one with `make` or `make test-matrix`)"
