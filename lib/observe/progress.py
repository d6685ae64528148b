"""Live state of a run or a test matrix, for `make watch` (scripts/watch.py).

A run is read from its folder alone, while it trains: metrics.json (status,
best validation loss; rewritten at every evaluation), the last progress and
evaluation lines of output.log (iteration, loss, ms/iter, tokens/s) and the
monitor's stats file. A matrix is a folder holding matrix.json, whose "runs"
map run ids to {"state": "pending|running|completed|failed|diverged", ...};
running runs are shown with their own progress, and the whole matrix with
its runs done and the time the rest still takes (lib/matrix/eta.py).
"""
from __future__ import annotations

import math
import re
import time
from pathlib import Path
from typing import Any

from lib.run.atomic import read_json_object
from lib.plural import counted

TAIL_BYTES = 64 << 10
STALE_S = 600  # a running run whose log is older than this may have died
_ITER = re.compile(r"^iter (\d+)/(\d+) \| loss (\S+) .*?\| (\S+) ms/iter \| ([\d,]+) tok/s", re.M)
_EVAL = re.compile(r"^eval step (\d+): val loss (\S+)", re.M)
STATES = ("running", "pending", "completed", "failed", "diverged")


def _tail(path: Path) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(max(0, f.seek(0, 2) - TAIL_BYTES))
            return f.read().decode(errors="replace")
    except OSError:
        return ""


def duration(seconds: float) -> str:
    seconds = int(max(0, seconds))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}h {m:02d}m" if h else f"{m}m {s:02d}s" if m else f"{s}s"


def run_progress(run_dir: Path, now: float | None = None) -> dict[str, Any]:
    """What a run has done so far, from its files."""
    run_dir = Path(run_dir).resolve()  # results/latest -> the run's own name
    metrics = read_json_object(run_dir / "metrics.json")  # absent until the first evaluation
    log = _tail(run_dir / "output.log")
    iters = _ITER.findall(log)
    out: dict[str, Any] = {"run_id": metrics.get("run_id", run_dir.name),
                           "status": metrics.get("status", "running" if iters else "starting"),
                           "best_val_loss": metrics.get("best_val_loss"),
                           "reason": metrics.get("reason")}
    if iters:
        it, total, loss, ms, tps = iters[-1]
        out.update(iteration=int(it), max_iters=int(total), loss=float(loss),
                   ms_per_iter=float(ms), tokens_per_sec=float(tps.replace(",", "")))
        if out["status"] in ("running", "starting") and math.isfinite(out["ms_per_iter"]):
            out["eta_s"] = (out["max_iters"] - out["iteration"]) * out["ms_per_iter"] / 1000
    evals = _EVAL.findall(log)
    if evals:
        out["last_eval"] = (int(evals[-1][0]), float(evals[-1][1]))
    try:
        out["updated_s_ago"] = (now or time.time()) - (run_dir / "output.log").stat().st_mtime
    except OSError:
        pass
    files = [(metrics.get("monitor") or {}).get("file"), "gpu_stats.json", "cpu_stats.json"]
    stats = next((s for f in files if f and (s := read_json_object(run_dir / f))), {})
    if stats.get("samples"):
        out["monitor"] = stats["samples"][-1]
        out["monitor_age_s"] = (now or time.time()) - out["monitor"].get("time", 0)
    return out


def _monitor_line(sample: dict[str, float]) -> str:
    parts = [f"{fmt.format(sample[k])}" for k, fmt in (
        ("gpu_util", "GPU {:.0f}%"), ("memory_used_mb", "{:,.0f} MiB"), ("power_w", "{:.0f} W"),
        ("temperature_c", "{:.0f} C"), ("rss_mb", "RSS {:,.0f} MiB"),
        ("cpu_percent", "CPU {:.0f}%")) if k in sample]
    return " | ".join(parts)


def progress_line(p: dict[str, Any]) -> str:
    if "iteration" not in p:
        return "no progress line yet"
    line = (f"iteration {p['iteration']}/{p['max_iters']} "
            f"({100 * p['iteration'] / p['max_iters']:.1f}%) | loss {p['loss']:.4f} | "
            f"{p['tokens_per_sec']:,.0f} tok/s")
    if "eta_s" in p:
        line += f" | ETA {duration(p['eta_s'])}"
    return line


def render_run(run_dir: Path, now: float | None = None) -> str:
    p = run_progress(run_dir, now)
    lines = [f"run {p['run_id']}  [{p['status']}]", "  " + progress_line(p)]
    if "last_eval" in p:
        best = f" (best {p['best_val_loss']:.4f})" if p["best_val_loss"] is not None else ""
        lines.append(f"  last eval: step {p['last_eval'][0]}, val loss {p['last_eval'][1]:.4f}{best}")
    if p.get("reason") and p["status"] != "running":
        lines.append(f"  {p['reason']}")
    if "monitor" in p:
        lines.append(f"  monitor ({duration(p['monitor_age_s'])} ago): {_monitor_line(p['monitor'])}")
    if "updated_s_ago" in p:
        ago = p["updated_s_ago"]
        stale = p["status"] in ("running", "starting") and ago > STALE_S
        lines.append(f"  log updated {duration(ago)} ago"
                     + (" (no progress since: stopped or killed?)" if stale else ""))
    return "\n".join(lines)


def _matrix_run_dir(folder: Path, run_id: str, entry: dict[str, Any]) -> Path | None:
    candidates = [entry.get("run_dir"), folder / run_id, folder.parent / run_id]
    for c in candidates:
        if c and (Path(c) / "output.log").exists():
            return Path(c)
    return None


_ESTIMATES: dict[Path, Any] = {}  # matrix folder -> its runs' estimates, across refreshes


def eta_line(folder: Path, matrix: dict[str, Any], now: float | None = None) -> str:
    """"3 of 5 runs done; about 4m 10s left (2 at a time; <what the estimates rest on>)"."""
    from lib.matrix.eta import Estimates, matrix_eta

    folder = Path(folder).resolve()
    estimates = _ESTIMATES.setdefault(folder, Estimates(folder))
    estimates.prepare()

    def progress(run_id: str) -> dict[str, Any] | None:
        run_dir = _matrix_run_dir(folder, run_id, matrix["runs"][run_id])
        return run_progress(run_dir, now) if run_dir is not None else None

    eta = matrix_eta(matrix, estimates, progress, now)
    done = f"{eta.done} of {counted(eta.total, 'run')} done"
    if eta.done == eta.total:
        return done
    if eta.remaining_s is None:
        return f"{done}; time left unknown (no estimate for some runs)"
    basis = f"; {eta.basis}" if eta.basis else ""
    return f"{done}; about {duration(eta.remaining_s)} left ({eta.at_once} at a time{basis})"


def render_matrix(folder: Path, now: float | None = None) -> str:
    matrix = read_json_object(Path(folder) / "matrix.json")
    runs: dict[str, dict[str, Any]] = matrix.get("runs") or {}
    counts = {s: sum(1 for r in runs.values() if r.get("state") == s) for s in STATES}
    head = ", ".join(f"{n} {s}" for s, n in counts.items() if n)
    lines = [f"matrix {matrix.get('matrix_id', Path(folder).name)}: {head or 'no runs'} "
             f"({counted(len(runs), 'run')})"]
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
    return "\n".join(lines)


def render(path: Path, now: float | None = None) -> str:
    """The view of whatever path is: a matrix folder or a run folder."""
    path = Path(path)
    if (path / "matrix.json").is_file():
        return render_matrix(path, now)
    if (path / "output.log").is_file() or (path / "metrics.json").is_file():
        return render_run(path, now)
    return f"{path}: no run or matrix there yet (start one with `make` or `make test-matrix`)"
