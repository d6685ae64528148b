"""`make gpu-check`: carried wheels into a scratch site, then the stages
(plan.py) each in its own process group under its time cap, into OUT/:
gpu_check.json, gpu_check.log and at most MAX_PNGS plots.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lib.bench.gpucheck import plan, record, wheels
from lib.bench.gpucheck.plan import STAGES, Stage
from lib.bench.gpucheck.settings import ROOT

MAX_PNGS = 4
ERROR_LINES = 12


def stage_env(site: Path | None) -> dict[str, str]:
    """The stages' environment: the carried wheels, then the project, first on the path."""
    paths = ([str(site)] if site else []) + [str(ROOT)]
    old = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths + ([old] if old else []))}


def run_stage(
    stage: Stage,
    cap_s: float,
    device: str,
    work: Path,
    env: dict[str, str],
    log: Callable[[str], None],
) -> dict[str, Any]:
    """One stage in a new process group, killed whole at its cap; its status,
    its figures so far and, when it failed, the last lines of its error."""
    log(f"\n===== stage {stage.name}: {stage.title} (cap {cap_s:.0f} s) =====")
    command = [sys.executable, "-m", "lib.bench.gpucheck.worker", stage.name, device, str(work)]
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
    figures_path = work / f"{stage.name}.json"
    figures = json.loads(figures_path.read_text()) if figures_path.exists() else {}
    result: dict[str, Any] = {"status": "done", "figures": figures}
    if timed_out or proc.returncode != 0:
        tail = output.strip().splitlines()[-ERROR_LINES:]
        if timed_out:
            tail.append(f"stopped at its time cap of {cap_s:.0f} s (figures so far kept)")
        # Cut short is not measured: the next check runs the stage again first.
        result.update(status="partial" if timed_out else "failed", error="\n".join(tail))
    log(f"----- stage {stage.name}: {result['status']}")
    return result


def check(
    device: str, out: Path, stages: str | None, budget_s: float, wheel_dir: Path = wheels.WHEEL_DIR
) -> dict[str, Any]:
    """The whole check; returns the record also written to out/gpu_check.json."""
    out.mkdir(parents=True, exist_ok=True)
    for stale in [out / "gpu_check.json", out / "gpu_check.log", *out.glob("*.png")]:
        stale.unlink(missing_ok=True)
    log_file = (out / "gpu_check.log").open("w")

    def log(text: str) -> None:
        print(text, flush=True)
        log_file.write(text + "\n")
        log_file.flush()

    chosen = plan.parse_stages(stages)
    work = Path(tempfile.mkdtemp(prefix="gpu-check-"))
    try:
        installed = wheels.install(wheel_dir, work / "site")
        other = wheels.installable(wheel_dir)[1]
        if other:
            log(f"not installed, built for another Python: {', '.join(w.name for w in other)}")
        env = stage_env(work / "site" if installed else None)
        measured = record.measured_stages()
        order = chosen or plan.default_order(measured)
        unmeasured = [n for n in STAGES if n not in measured]
        log(
            f"gpu-check on {device}: stages {', '.join(order)}, budget {budget_s:.0f} s; "
            f"{len(installed)} carried wheels installed; unmeasured at this code: "
            f"{', '.join(unmeasured) or 'none'}"
        )
        records = plan.schedule(
            order, device, budget_s, lambda s, cap: run_stage(s, cap, device, work, env, log)
        )
        result = {
            "environment": record.environment(device),
            "budget_s": budget_s,
            "order": order,
            "carried_wheels": installed,
            "stages": records,
        }
        pngs = sorted(work.glob("*.png"))[:MAX_PNGS]
        for png in pngs:
            shutil.copy2(png, out / png.name)
        result["plots"] = [p.name for p in pngs]
        (out / "gpu_check.json").write_text(json.dumps(result, indent=1) + "\n")
        ran = {n for n, r in records.items() if r["status"] in ("done", "failed")}
        still = [n for n in unmeasured if n not in ran] if device == "cuda" else list(STAGES)
        log(
            "\n"
            + "\n".join(
                f"stage {n}: {r['status']:<7} {r['seconds']:7.1f} s  {STAGES[n].title}"
                for n, r in records.items()
            )
        )
        log(f"still unmeasured on a GPU at this code: {', '.join(still) or 'none'}")
        log(
            f"wrote {out / 'gpu_check.json'}; `scripts/gpu_report.py {out / 'gpu_check.json'}` "
            f"files it and regenerates docs/benchmarks.md's GPU section"
        )
        return result
    finally:
        log_file.close()
        shutil.rmtree(work, ignore_errors=True)
