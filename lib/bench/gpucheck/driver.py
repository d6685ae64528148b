"""`make gpu-check`: carried wheels into a scratch site, the compile caches
carried from the last window (cache.py), then the stages in the converging
order (plan.py), each in its own process group under its time cap, into
OUT/: gpu_check.json, gpu_check.log, at most MAX_PNGS plots and
compile-cache.tar.gz (at most 8 files, few enough to copy back at once).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lib.bench.gpucheck import cache, plan, record, wheels
from lib.bench.gpucheck.plan import STAGES, Planned, Stage
from lib.bench.gpucheck.settings import ROOT, describe_shapes
from lib.bench.gpucheck.worker import SKIPPED, START

MAX_PNGS = 4
ERROR_LINES = 12


def stage_env(site: Path | None, caches: Path | None = None) -> dict[str, str]:
    """The stages' environment: the carried wheels, then the project, first on
    the path; the compilers' caches under `caches`."""
    paths = ([str(site)] if site else []) + [str(ROOT)]
    old = os.environ.get("PYTHONPATH")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths + ([old] if old else []))}
    return {**env, **(cache.environment(caches) if caches else {})}


def run_stage(
    stage: Stage,
    cap_s: float,
    device: str,
    work: Path,
    env: dict[str, str],
    log: Callable[[str], None],
    resume: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One stage in a new process group, killed whole at its cap; its status,
    its figures so far and, when it failed, the last lines of its error. With
    `resume`, the stage starts from those figures and measures what they lack."""
    log(f"\n===== stage {stage.name}: {stage.title} (cap {cap_s:.0f} s) =====")
    work.mkdir(parents=True, exist_ok=True)
    figures_path = work / f"{stage.name}.json"
    figures_path.unlink(missing_ok=True)
    if resume:
        figures_path.write_text(json.dumps(resume, indent=1) + "\n")
    compiled_path = work / f"{stage.name}.compile.json"
    compiled_path.unlink(missing_ok=True)
    cache_dirs = [Path(env[k]) for k in CACHE_DIR_VARS if env.get(k)]
    before = _files(cache_dirs)
    command = [sys.executable, "-c", START, stage.name, device, str(work)]
    proc = subprocess.Popen(
        command,
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        output, _ = proc.communicate(timeout=cap_s)
        timed_out = False
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the stage and every process it started
        output, _ = proc.communicate()
        timed_out = True
    log(output.rstrip())
    figures = json.loads(figures_path.read_text()) if figures_path.exists() else {}
    result: dict[str, Any] = {"status": "done", "figures": figures}
    lines = output.strip().splitlines()
    if not timed_out and proc.returncode == SKIPPED:
        result.update(status="skipped", reason=lines[-1] if lines else "")
    elif timed_out or proc.returncode != 0:
        tail = lines[-ERROR_LINES:]
        if timed_out:
            tail.append(f"stopped at its time cap of {cap_s:.0f} s (figures so far kept)")
        # Cut short: the next check resumes it from these figures.
        result.update(status="partial" if timed_out else "failed", error="\n".join(tail))
    if cache_dirs:
        # Whether the carried caches were used: files there before, files this
        # stage added, and torch's own hit and miss counts when it compiled in-process.
        result["compile_cache"] = {
            "files_before": before,
            "files_written": _files(cache_dirs) - before,
        }
        if compiled_path.exists():
            result["compile_cache"].update(json.loads(compiled_path.read_text()))
    log(f"----- stage {stage.name}: {result['status']}")
    return result


CACHE_DIR_VARS = ("TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR")


def _files(folders: list[Path]) -> int:
    return sum(len(names) for folder in folders for _, _, names in os.walk(folder))


def gpu_kind(device: str) -> str:
    """docs/bench-data's folder for this device (h200, h100, ...; cpu)."""
    if device != "cuda":
        return "cpu"
    import torch

    return record.slug(torch.cuda.get_device_name(0))


def plan_text(planned: list[Planned], device: str, budget_s: float) -> list[str]:
    """What the check will run and why, and the stages it expects to reach."""
    order = [p.name for p in planned]
    sure, maybe = plan.expected(order, device, budget_s)
    caps = sum(STAGES[n].cap(device) for n in sure)
    lines = [f"  {p.name} ({STAGES[p.name].cap(device):.0f} s cap): {p.reason}" for p in planned]
    lines.append(
        f"expects to reach {', '.join(sure) or 'no stage'} ({caps:.0f} s of caps in a "
        f"{budget_s:.0f} s budget)"
        + (f"; {', '.join(maybe)} only if earlier stages end before their caps" if maybe else "")
    )
    return lines


def check(
    device: str,
    out: Path,
    stages: str | None,
    budget_s: float,
    wheel_dir: Path = wheels.WHEEL_DIR,
    cache_archive: Path | None = None,
) -> dict[str, Any]:
    """The whole check; returns the record also written to out/gpu_check.json."""
    began = time.monotonic()
    out.mkdir(parents=True, exist_ok=True)
    stale = [out / "gpu_check.json", out / "gpu_check.log", out / cache.ARCHIVE]
    for path in stale + list(out.glob("*.png")):
        path.unlink(missing_ok=True)
    log_file = (out / "gpu_check.log").open("w")

    def log(text: str) -> None:
        print(text, flush=True)
        log_file.write(text + "\n")
        log_file.flush()

    chosen = plan.parse_stages(stages)
    work = Path(tempfile.mkdtemp(prefix="gpu-check-"))
    caches = cache.cache_root()
    try:
        installed = wheels.install(wheel_dir, work / "site")
        other = wheels.installable(wheel_dir)[1]
        if other:
            log(f"not installed, built for another Python: {', '.join(w.name for w in other)}")
        restored = cache.restore(cache_archive or ROOT / cache.CARRIED, caches)
        env = stage_env(work / "site" if installed else None, caches)
        kind = gpu_kind(device)
        planned = plan.order_stages(record.history(kind), record.changed_since, chosen)
        order = [p.name for p in planned]
        log(
            f"gpu-check on {device} ({kind}): budget {budget_s:.0f} s; {len(installed)} "
            f"carried wheels installed; compile caches: "
            + (
                f"{restored['restored']} files from {restored['from']}"
                if restored["restored"]
                else str(restored["note"])
            )
        )
        if device != "cuda":
            log(f"DEVICE=cpu: each stage's code path on tiny shapes ({describe_shapes()})")
        log("stages in order:\n" + "\n".join(plan_text(planned, device, budget_s)))
        setup_s = time.monotonic() - began
        resumes = {p.name: p.resume for p in planned if p.resume}
        records = plan.schedule(
            order,
            device,
            budget_s,
            lambda s, cap: run_stage(s, cap, device, work, env, log, resumes.get(s.name)),
        )
        history = record.history(kind)
        for name in records:
            if name in resumes and records[name]["status"] != "skipped":
                earlier = history[name].partial or {}
                records[name]["resumed_from"] = {k: earlier.get(k) for k in ("date", "commit")}
        packed = cache.pack(out, caches)
        result = {
            "environment": record.environment(device),
            "budget_s": budget_s,
            "setup_s": round(setup_s, 1),
            "order": order,
            "carried_wheels": installed,
            "compile_cache": {"restored": restored, "packed": packed},
            "stages": records,
        }
        pngs = sorted(work.glob("*.png"))[:MAX_PNGS]
        for png in pngs:
            shutil.copy2(png, out / png.name)
        result["plots"] = [p.name for p in pngs]
        (out / "gpu_check.json").write_text(json.dumps(result, indent=1) + "\n")
        log("\n" + "\n".join(summary_line(n, r) for n, r in records.items()))
        log(f"compile caches: {packed.get('note') or _packed_text(packed)}")
        if device == "cuda":
            left = [n for n, r in records.items() if record.finished(r) is not True]
            log(f"not finished in this window: {', '.join(left) or 'none'}")
            log(
                f"wrote {out / 'gpu_check.json'}; `scripts/gpu_report.py "
                f"{out / 'gpu_check.json'}` files it and regenerates docs/benchmarks.md's "
                f"GPU section; file it before the next window, which goes on from it"
            )
        else:
            log(
                f"wrote {out / 'gpu_check.json'}: a check of the code paths on a CPU, "
                f"not figures for docs/ (nothing to file)"
            )
        return result
    finally:
        log_file.close()
        shutil.rmtree(work, ignore_errors=True)


def _packed_text(packed: dict[str, Any]) -> str:
    text = (
        f"{packed['packed']} files in {packed['archive']} ({packed['bytes'] / 2**20:.1f} MiB); "
        f"carry it as {cache.CARRIED} in the next window"
    )
    if packed["groups_left_out"]:
        text += f" ({packed['groups_left_out']} oldest cache folders left out to fit)"
    return text


def summary_line(name: str, r: dict[str, Any]) -> str:
    """One stage's status, time and title; stage a's counts."""
    line = f"stage {name}: {r['status']:<7} {r['seconds']:7.1f} s  {STAGES[name].title}"
    counts = (r.get("figures") or {}).get("counts")
    if name == "a" and counts:
        line += " (" + ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in counts.items() if v) + ")"
    if r["status"] == "skipped" and r.get("reason"):
        line += f": {r['reason']}"
    return line
