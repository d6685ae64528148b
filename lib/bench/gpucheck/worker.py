"""One stage of `make gpu-check` in its own process:

    python -m lib.bench.gpucheck.worker STAGE DEVICE WORK_DIR

The stage's figures go to WORK_DIR/<stage>.json as each is measured
(atomically), so the driver keeps them even when it ends the stage at its
time cap. The exit status says done (0) or failed; the error's last lines
go to stderr, which the driver keeps in the log and the record.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

STAGE_FUNCTIONS = {
    "a": "stages:gpu_tests",
    "b": "stages:trainer_step",
    "c": "stages:reference_memory",
    "d": "stages:optimizer_cost",
    "e": "stages:seqlen",
    "f": "runs:speed_and_runs",
}


def figures_writer(path: Path) -> Callable[[str, Any], None]:
    figures: dict[str, Any] = {}

    def put(key: str, value: Any) -> None:
        figures[key] = value
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(figures, indent=1, default=str) + "\n")
        os.replace(tmp, path)

    return put


def main(argv: list[str]) -> int:
    import importlib

    stage, device, work = argv[0], argv[1], Path(argv[2])
    module, function = STAGE_FUNCTIONS[stage].split(":")
    call = getattr(importlib.import_module(f"lib.bench.gpucheck.{module}"), function)
    work.mkdir(parents=True, exist_ok=True)
    try:
        call(device, work, figures_writer(work / f"{stage}.json"))
    except Exception:
        traceback.print_exc()
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
