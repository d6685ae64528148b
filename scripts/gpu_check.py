"""Test and measure everything GPU-side in one time-boxed run: `make gpu-check`.

Installs the wheels `make gpu-wheels` put in .whl/ into a scratch folder
(never the system), then runs stages a..f (lib/bench/gpucheck/plan.py), each
in its own process under its own time cap, never starting one that would
overrun GPU_CHECK_BUDGET_S (default 480). Writes OUT/gpu_check.json,
OUT/gpu_check.log and at most 4 plots. DEVICE=cpu runs every stage's code
path on tiny shapes (under a minute); STAGES=abc picks stages.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

# Imports no carried package: it runs before the wheels are installed. On a node
# without the .venv, `make gpu-check` puts the project on PYTHONPATH.
from lib.bench.gpucheck import plan

ROOT = Path(__file__).resolve().parent.parent


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument(
        "--device",
        default="cuda",
        choices=["auto", "cuda", "cpu"],
        help="cuda (auto is cuda); cpu: every code path on tiny shapes",
    )
    p.add_argument("--out", type=Path, help="output folder (default results/gpu-check-<date>)")
    p.add_argument("--wheels", type=Path, help="carried wheels (default .whl/)")
    p.add_argument("--stages", help="e.g. abc or a,c (default: unmeasured first, then the rest)")
    args = p.parse_args(argv)
    text = os.environ.get("GPU_CHECK_BUDGET_S") or str(plan.DEFAULT_BUDGET_S)
    try:
        budget = float(text)
    except ValueError:
        budget = -1.0
    if not budget > 0:
        raise ValueError(f"GPU_CHECK_BUDGET_S={text!r}: give the total time in seconds, e.g. 480")
    args.device = "cuda" if args.device == "auto" else args.device
    plan.parse_stages(args.stages)  # a bad STAGES fails before anything is installed
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(
            f"no CUDA device for torch {torch.__version__}: run this on a GPU "
            f"machine, or `make gpu-check DEVICE=cpu` to check the code paths"
        )
    from lib.bench.gpucheck.driver import check

    out = args.out or ROOT / "results" / f"gpu-check-{time.strftime('%Y%m%d-%H%M%S')}"
    from lib.bench.gpucheck.wheels import WHEEL_DIR

    result = check(args.device, out, args.stages, budget, args.wheels or WHEEL_DIR)
    return 0 if all(s["status"] != "failed" for s in result["stages"].values()) else 1


if __name__ == "__main__":
    # Not lib.cli.run_script: it imports kconfiglib, which is installed later from .whl/.
    try:
        raise SystemExit(main(sys.argv[1:]))
    except (ValueError, RuntimeError) as err:
        print(f"error: {err}", file=sys.stderr)
        raise SystemExit(2) from None
