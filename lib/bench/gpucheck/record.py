"""What a gpu_check.json says about where it ran, and the records kept in
docs/bench-data/<gpu>/ by earlier checks.

A stage counts as measured at this code when a filed record from a CUDA
device ran it to the end (done or failed; not cut short by its cap) at a commit whose tree differs from the
working tree only under docs/ (filing the record and regenerating
docs/benchmarks.md changes nothing measured). Without git (a tree copied to
a GPU node, or one whose git metadata is stale), only the same commit,
from GPU_CHECK_COMMIT, counts.
"""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
import time
from pathlib import Path
from typing import Any

from lib.bench.gpucheck.settings import ROOT

BENCH_DATA = ROOT / "docs" / "bench-data"
PREFIX = "gpu_check_"


def _git(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True)


def commit() -> dict[str, Any]:
    """The commit checked, and whether the tree had changes besides docs/.
    GPU_CHECK_COMMIT, when set, names it: a tree copied to a GPU node may
    carry stale git metadata (seen on 2026-11-26: HEAD one commit behind)."""
    if os.environ.get("GPU_CHECK_COMMIT"):
        return {"commit": os.environ["GPU_CHECK_COMMIT"], "dirty": None}
    try:
        head = _git("rev-parse", "HEAD")
        dirty = _git("status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)docs")
    except OSError:  # no git on the node
        head = dirty = subprocess.CompletedProcess([], 1, "", "")
    if head.returncode != 0:
        return {"commit": os.environ.get("GPU_CHECK_COMMIT") or "unknown", "dirty": None}
    return {"commit": head.stdout.strip(), "dirty": bool(dirty.stdout.strip())}


def environment(device: str) -> dict[str, Any]:
    """Device, driver and library versions, commit and date."""
    import torch

    info: dict[str, Any] = {
        "device": device,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "date": time.strftime("%Y-%m-%d %H:%M:%S %z"),
    }
    try:
        import triton

        info["triton"] = triton.__version__
    except ImportError:
        info["triton"] = None
    if device == "cuda":
        info.update(
            device_name=torch.cuda.get_device_name(0),
            cuda=torch.version.cuda,
            gpus=torch.cuda.device_count(),
            driver=_driver_version(),
        )
    else:
        info.update(
            device_name=f"cpu ({platform.processor() or platform.machine()}, "
            f"{torch.get_num_threads()} threads)",
            cuda=None,
            gpus=0,
            driver=None,
        )
    return {**info, **commit()}


def _driver_version() -> str | None:
    try:
        done = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip().splitlines()[0] if done.returncode == 0 and done.stdout else None


def slug(device_name: str) -> str:
    """docs/bench-data's folder for a device: the known GPU's stem (h100,
    h100-pcie, h200), else the name in lower case and dashes."""
    from lib.hardware.devices import match_profile

    if device_name.startswith("cpu"):
        return "cpu"
    known = match_profile(device_name)
    text = known.match if known else device_name.removeprefix("NVIDIA ")
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def same_code(recorded: str, current: str) -> bool:
    if recorded == current:
        return True
    if recorded == "unknown" or current == "unknown":
        return False
    try:
        return _git("diff", "--quiet", recorded, "--", ".", ":(exclude)docs").returncode == 0
    except OSError:
        return False


def measured_stages(bench_data: Path = BENCH_DATA, current: str | None = None) -> set[str]:
    """Stages some filed CUDA record ran (done or failed) at this code."""
    current = current or commit()["commit"]
    measured: set[str] = set()
    for path in sorted(bench_data.glob(f"*/{PREFIX}*.json")):
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if record.get("environment", {}).get("device") != "cuda":
            continue
        ran = {
            name
            for name, s in record.get("stages", {}).items()
            if s.get("status") in ("done", "failed")
        }
        if ran - measured and same_code(record["environment"].get("commit", "unknown"), current):
            measured |= ran
    return measured


def filed_path(record: dict[str, Any], bench_data: Path = BENCH_DATA) -> Path:
    """docs/bench-data/<gpu>/gpu_check_<YYYYmmdd-HHMMSS>.json for a record."""
    env = record["environment"]
    stamp = time.strftime("%Y%m%d-%H%M%S", time.strptime(env["date"][:19], "%Y-%m-%d %H:%M:%S"))
    return bench_data / slug(env["device_name"]) / f"{PREFIX}{stamp}.json"


def combine(records: list[dict[str, Any]]) -> dict[str, Any]:
    """One record from several checks of one GPU (short windows that each ran
    some stages): per stage, the newest run that finished (done or failed),
    else the newest cut short, else the newest skip. Each stage names the
    record it came from; the environment is the newest record's."""
    if not records:
        raise ValueError("no gpu_check.json to combine")
    devices = {r["environment"].get("device_name") for r in records}
    if len(devices) > 1:
        raise ValueError(f"records of different devices cannot be combined: {sorted(devices)}")
    newest = sorted(records, key=lambda r: r["environment"]["date"], reverse=True)
    rank = {"done": 0, "failed": 0, "partial": 1, "skipped": 2}
    stages: dict[str, Any] = {}
    names = dict.fromkeys(n for r in newest for n in r.get("stages", {}))
    for name in sorted(names):
        tries = [(r, r["stages"][name]) for r in newest if name in r.get("stages", {})]
        r, stage = min(tries, key=lambda t: rank.get(t[1].get("status", "skipped"), 3))
        env = r["environment"]
        stages[name] = {**stage, "record": {"date": env["date"], "commit": env["commit"]}}
    return {**newest[0], "stages": stages, "combined": len(records)}
