"""What a gpu_check.json says about where it ran, and the records kept in
docs/bench-data/<gpu>/ by earlier checks: per stage, its newest finished run
and a newer one cut short (history), and which files changed since a
record's commit (changed_since), for plan.order_stages. Without git (a tree
copied to a GPU node without it), every finished figure counts as stale."""

from __future__ import annotations

import functools
import json
import os
import platform
import re
import subprocess
import time
from pathlib import Path
from typing import Any

from lib.bench.gpucheck.plan import History
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
            ptxas=_ptxas_version(torch.cuda.get_device_capability(0)),
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


def _ptxas_version(capability: tuple[int, int]) -> str | None:
    """The assembler Triton compiles with for this GPU ("12.9" or so, with its
    path), or None: known Hopper miscompiles depend on its version."""
    try:
        from triton.backends.nvidia.compiler import get_ptxas

        tool = get_ptxas(capability[0] * 10 + capability[1])
        return f"{tool.version} ({tool.path})"
    except Exception:  # any Triton layout without it: the record just lacks it
        return None


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


def finished(stage: dict[str, Any]) -> bool | None:
    """True: the stage ran to its end (done or failed); False: its cap cut it
    short; None: it did not run. Records from before `partial` existed said
    failed with "stopped at its time cap"."""
    status = stage.get("status")
    if status == "failed" and "stopped at its time cap" in (stage.get("error") or ""):
        return False
    return {"done": True, "failed": True, "partial": False}.get(status or "")


def history(kind: str, bench_data: Path = BENCH_DATA) -> dict[str, History]:
    """Per stage, the newest finished run in the CUDA records filed under
    bench_data/<kind>/, and a newer run cut short."""
    runs: dict[str, History] = {}
    for path in sorted((bench_data / kind).glob(f"{PREFIX}*.json")):
        try:
            record = json.loads(path.read_text())
            env = record["environment"]
        except (OSError, ValueError, KeyError):
            continue
        if env.get("device") != "cuda":
            continue
        for name, stage in record.get("stages", {}).items():
            ended = finished(stage)
            if ended is None:
                continue
            run = {"commit": env.get("commit", "unknown"), "date": env["date"], "stage": stage}
            h = runs.setdefault(name, History())
            if ended and (h.finished is None or run["date"] >= h.finished["date"]):
                h.finished = run
            elif not ended and (h.partial is None or run["date"] >= h.partial["date"]):
                h.partial = run
    for h in runs.values():
        if h.partial and h.finished and h.partial["date"] <= h.finished["date"]:
            h.partial = None  # finished since: nothing to resume
    return runs


@functools.lru_cache(maxsize=64)
def changed_since(recorded: str, root: Path = ROOT) -> set[str] | None:
    """The files of the working tree that differ from commit `recorded`
    (tracked files, uncommitted changes included), or None when git cannot
    tell (no git, an unknown commit). The working tree, not HEAD: a tree
    copied to a GPU node may carry stale git metadata."""
    if not recorded or recorded == "unknown":
        return None
    try:
        done = subprocess.run(
            ["git", "-C", str(root), "diff", "--name-only", recorded, "--"],
            capture_output=True,
            text=True,
        )
    except OSError:
        return None
    return set(done.stdout.split("\n")) - {""} if done.returncode == 0 else None


def filed_path(record: dict[str, Any], bench_data: Path = BENCH_DATA) -> Path:
    """docs/bench-data/<gpu>/gpu_check_<YYYYmmdd-HHMMSS>.json for a record."""
    env = record["environment"]
    stamp = time.strftime("%Y%m%d-%H%M%S", time.strptime(env["date"][:19], "%Y-%m-%d %H:%M:%S"))
    return bench_data / slug(env["device_name"]) / f"{PREFIX}{stamp}.json"


def not_combined(filed: list[Path]) -> list[Path]:
    """Records of the same GPUs filed before, beside `filed`, and not among them
    (gpu_report renders only the records it is given)."""
    folders = {path.parent for path in filed}
    given = {path.resolve() for path in filed}
    return sorted(
        path
        for folder in folders
        for path in folder.glob(f"{PREFIX}*.json")
        if path.resolve() not in given
    )


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
    rank = {True: 0, False: 1, None: 2}  # finished, cut short, did not run
    stages: dict[str, Any] = {}
    names = dict.fromkeys(n for r in newest for n in r.get("stages", {}))
    for name in sorted(names):
        tries = [(r, r["stages"][name]) for r in newest if name in r.get("stages", {})]
        r, stage = min(tries, key=lambda t: rank[finished(t[1])])
        env = r["environment"]
        stages[name] = {**stage, "record": {"date": env["date"], "commit": env["commit"]}}
    return {**newest[0], "stages": stages, "combined": len(records)}
