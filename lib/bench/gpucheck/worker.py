"""One stage of `make gpu-check` in its own process:

    python -c "$START" STAGE DEVICE WORK_DIR      (START below)

The stage's figures go to WORK_DIR/<stage>.json as each is measured
(figures.py), so the driver keeps them even when it ends the stage at its
time cap. The exit status says done (0), failed (1) or skipped (3, the
reason on the last line of stderr); the error's last lines go to stderr,
which the driver keeps in the log and the record.
"""

from __future__ import annotations

import json
import sys
import traceback
from pathlib import Path

from lib.bench.gpucheck.figures import Figures, StageSkipped

SKIPPED = 3
# How the driver starts a worker: an entry point, so it imports lib/rules.py
# (every package's rules and analyses) before the stage loads a configuration;
# this module sits below that layer and cannot import it itself. The clock is
# read first, so a stage's progress (figures.Progress) counts those imports too.
START = (
    "import time; began = time.monotonic(); "
    "import sys, lib.rules; from lib.bench.gpucheck.worker import main; "
    "raise SystemExit(main(sys.argv[1:], began))"
)
STAGE_FUNCTIONS = {
    "a": "gputests:gpu_tests",
    "b": "stages:trainer_step",
    "c": "stages:reference_memory",
    "d": "stages:optimizer_cost",
    "e": "stages:seqlen",
    "f": "runs:speed_and_runs",
}


def main(argv: list[str], began: float | None = None) -> int:
    import importlib

    stage, device, work = argv[0], argv[1], Path(argv[2])
    module, function = STAGE_FUNCTIONS[stage].split(":")
    call = getattr(importlib.import_module(f"lib.bench.gpucheck.{module}"), function)
    work.mkdir(parents=True, exist_ok=True)
    try:
        call(device, work, Figures(work / f"{stage}.json", began))
    except StageSkipped as why:
        print(why, file=sys.stderr, flush=True)
        return SKIPPED
    except Exception:
        traceback.print_exc()
        return 1
    finally:
        note_compile_cache(work / f"{stage}.compile.json")
    return 0


# torch's counters of its compile caches: inductor's compiled graphs and
# AOTAutograd's joint graphs, found on disk (hit) or compiled (miss).
CACHE_COUNTERS = {
    "fxgraph_cache_hit": ("inductor", "fxgraph_cache_hit"),
    "fxgraph_cache_miss": ("inductor", "fxgraph_cache_miss"),
    "autograd_cache_hit": ("aot_autograd", "autograd_cache_hit"),
    "autograd_cache_miss": ("aot_autograd", "autograd_cache_miss"),
}


def note_compile_cache(path: Path) -> None:
    """What this process's torch.compile found in the carried caches, as
    counted by torch (nothing when the stage compiled nothing here: its
    subprocesses, pytest's or the scripts', keep their own counts)."""
    utils = sys.modules.get("torch._dynamo.utils")
    counters = getattr(utils, "counters", None)
    if not counters:
        return
    found = {name: int(counters[group][key]) for name, (group, key) in CACHE_COUNTERS.items()}
    if any(found.values()):
        path.write_text(json.dumps(found) + "\n")
