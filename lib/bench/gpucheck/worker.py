"""One stage of `make gpu-check` in its own process:

    python -c "$START" STAGE DEVICE WORK_DIR      (START below)

The stage's figures go to WORK_DIR/<stage>.json as each is measured
(figures.py), so the driver keeps them even when it ends the stage at its
time cap. The exit status says done (0), failed (1) or skipped (3, the
reason on the last line of stderr); the error's last lines go to stderr,
which the driver keeps in the log and the record.
"""

from __future__ import annotations

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
    return 0
