"""Live state of a run, for `make watch` (scripts/watch.py; a matrix's view,
built on this one, is lib/matrix/watch.py).

A run is read from its folder alone, while it trains: metrics.json (status,
best validation loss; rewritten at every evaluation), the last progress and
evaluation lines of output.log (iteration, loss, ms/iter, tokens/s) and the
monitor's stats file.
"""

from __future__ import annotations

import math
import re
import time
from pathlib import Path
from typing import Any

from lib.atomic import read_json_object

TAIL_BYTES = 64 << 10
STALE_S = 600  # a running run whose log is older than this may have died
_ITER = re.compile(r"^iter (\d+)/(\d+) \| loss (\S+) .*?\| (\S+) ms/iter \| ([\d,]+) tok/s", re.M)
_EVAL = re.compile(r"^eval step (\d+): val loss (\S+)", re.M)


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
    out: dict[str, Any] = {
        "run_id": metrics.get("run_id", run_dir.name),
        "status": metrics.get("status", "running" if iters else "starting"),
        "best_val_loss": metrics.get("best_val_loss"),
        "reason": metrics.get("reason"),
    }
    if iters:
        it, total, loss, ms, tps = iters[-1]
        out.update(
            iteration=int(it),
            max_iters=int(total),
            loss=float(loss),
            ms_per_iter=float(ms),
            tokens_per_sec=float(tps.replace(",", "")),
        )
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
    parts = [
        f"{fmt.format(sample[k])}"
        for k, fmt in (
            ("gpu_util", "GPU {:.0f}%"),
            ("memory_used_mb", "{:,.0f} MiB"),
            ("power_w", "{:.0f} W"),
            ("temperature_c", "{:.0f} C"),
            ("rss_mb", "RSS {:,.0f} MiB"),
            ("cpu_percent", "CPU {:.0f}%"),
        )
        if k in sample
    ]
    return " | ".join(parts)


def progress_line(p: dict[str, Any]) -> str:
    if "iteration" not in p:
        return "no progress line yet"
    line = (
        f"iteration {p['iteration']}/{p['max_iters']} "
        f"({100 * p['iteration'] / p['max_iters']:.1f}%) | loss {p['loss']:.4f} | "
        f"{p['tokens_per_sec']:,.0f} tok/s"
    )
    if "eta_s" in p:
        line += f" | ETA {duration(p['eta_s'])}"
    return line


def render_run(run_dir: Path, now: float | None = None) -> str:
    p = run_progress(run_dir, now)
    lines = [f"run {p['run_id']}  [{p['status']}]", "  " + progress_line(p)]
    if "last_eval" in p:
        best = f" (best {p['best_val_loss']:.4f})" if p["best_val_loss"] is not None else ""
        lines.append(
            f"  last eval: step {p['last_eval'][0]}, val loss {p['last_eval'][1]:.4f}{best}"
        )
    if p.get("reason") and p["status"] != "running":
        lines.append(f"  {p['reason']}")
    if "monitor" in p:
        lines.append(
            f"  monitor ({duration(p['monitor_age_s'])} ago): {_monitor_line(p['monitor'])}"
        )
    if "updated_s_ago" in p:
        ago = p["updated_s_ago"]
        stale = p["status"] in ("running", "starting") and ago > STALE_S
        lines.append(
            f"  log updated {duration(ago)} ago"
            + (" (no progress since: stopped or killed?)" if stale else "")
        )
    return "\n".join(lines)
