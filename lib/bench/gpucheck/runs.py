"""Stage f of `make gpu-check`, as the budget allows: `make bench-inference`
on a tiny trained run, a tiny matrix packed several to a GPU against one per
GPU (scripts/bench_packing.sh), then the speed options stage b does not
measure, each one's trainer step.

The tiny run trains in a scratch copy of the project (work/project), so the
user's .config and results/ stay as they are; every command is the same
script a make target calls, run with this interpreter (the GPU node's own
Python, with the carried wheels on PYTHONPATH).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from lib.bench.gpucheck import settings as S
from lib.bench.gpucheck.figures import reached
from lib.bench.gpucheck.stages import Put, run_config

SOURCES = (
    "Makefile",
    "Kconfig",
    "requirements.txt",
    "requirements-lock.txt",
    "pyproject.toml",
    "lib",
    "gpt2",
    "hamt",
    "scripts",
    "defconfigs",
)


def _script(project: Path, *args: str) -> str:
    """Run one of the project's scripts there; its output, or an error with its last lines."""
    # The copy's own sources first: an editable install would point at the real tree.
    old = os.environ.get("PYTHONPATH")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(project)] + ([old] if old else []))}
    done = subprocess.run(
        [sys.executable, *args], cwd=project, capture_output=True, text=True, env=env
    )
    if done.returncode != 0:
        tail = (done.stdout + done.stderr).strip().splitlines()[-8:]
        raise RuntimeError(f"{' '.join(args[:2])} failed:\n" + "\n".join(tail))
    return done.stdout


def scratch_project(work: Path) -> Path:
    project = work / "project"
    if not project.exists():
        project.mkdir(parents=True)
        for name in SOURCES:
            src = S.ROOT / name
            if src.is_dir():
                shutil.copytree(src, project / name, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                shutil.copy2(src, project / name)
    return project


def inference(device: str, work: Path) -> dict[str, Any]:
    """Train gpt2-tiny-shakespeare a few steps, then `make bench-inference` on it."""
    g = S.for_device(device)
    project = scratch_project(work)
    _script(project, "scripts/kconfig.py", "defconfig", "gpt2-tiny-shakespeare")
    _script(project, "scripts/prepare.py", f"DEVICE={device}", f"SET={g['tiny_run']}")
    _script(
        project,
        "scripts/train.py",
        f"DEVICE={device}",
        f"MAX_ITERS={g['tiny_iters']}",
        "TRACKER=none",
        f"SET={g['tiny_run']}",
    )
    _script(project, "scripts/bench.py", "inference", f"DEVICE={device}")
    run_dir = (project / "results" / "latest").resolve()
    return json.loads((run_dir / "metrics.json").read_text())["inference"]


def packing(device: str, work: Path) -> dict[str, Any]:
    """scripts/bench_packing.sh: the same tiny matrix, MATRIX_RUNS_PER_GPU=1 then auto."""
    g = S.for_device(device)
    out = work / "packing.json"
    env = {
        **os.environ,
        "PYTHON": sys.executable,
        "BENCH_DEVICE": device,
        "BENCH_RUNS": str(g["matrix_runs"]),
        "BENCH_ITERS": str(g["matrix_iters"]),
        "BENCH_MODES": "1 auto",
        "BENCH_OUT": str(out),
        "BENCH_SET": g["tiny_run"],
    }
    done = subprocess.run(
        ["bash", str(S.ROOT / "scripts" / "bench_packing.sh")],
        env=env,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise RuntimeError(
            "bench_packing.sh failed:\n"
            + "\n".join((done.stdout + done.stderr).strip().splitlines()[-8:])
        )
    record = json.loads(out.read_text())
    modes = record["modes"]
    return {
        "runs": record["runs"],
        "max_iters": record["max_iters"],
        "modes": modes,
        "packed_speedup": modes["auto"]["speedup_vs_1"],
    }


def speed_option(device: str, symbols: str) -> dict[str, Any]:
    """The trainer's step on the baseline with one speed option set (ours alone)."""
    from lib.bench.step import run_bench

    g = S.for_device(device)
    run = run_config(
        S.BASELINE, S.overrides(device, g["speed_batch"], 1, compile=True, extra=symbols)
    )
    r = run_bench(run, steps=g["speed_steps"], warmup=2, rounds=1, profile_steps=0, plain=False)
    return {
        "ms_per_iter": r["ours"]["ms_per_iter"],
        "mfu": r["ours"]["mfu"],
        "peak_memory_mb": r["peak_memory_mb"],
        "speed": r["ours"]["speed"],
    }


def speed_and_runs(device: str, work: Path, put: Put) -> None:
    """f: every item in turn; an item that fails is recorded with its error
    and the next one runs. Items the time cap cuts off are absent; a resumed
    run measures only those its earlier run lacks."""
    options = S.SPEED_OPTIONS_GPU if device == "cuda" else S.SPEED_OPTIONS_CPU
    items: list[tuple[str, Any]] = [
        ("inference", lambda: inference(device, work)),
        ("packing", lambda: packing(device, work)),
    ]
    items += [
        (f"speed {name}", lambda symbols=symbols: speed_option(device, symbols))
        for name, symbols in options.items()
    ]
    failed = []
    done = reached(put)
    for name, call in items:
        value = done.get(name)
        if isinstance(value, dict) and "error" not in value:
            continue
        try:
            put(name, call())
        except Exception as err:  # one option failing must not hide the others' figures
            put(name, {"error": "\n".join(f"{type(err).__name__}: {err}".splitlines()[-8:])})
            failed.append(name)
    if failed:
        raise RuntimeError(f"{len(failed)} of {len(items)} items failed: {', '.join(failed)}")
