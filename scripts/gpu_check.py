"""Test and measure everything GPU-side in one time-boxed run: `make gpu-check`.

Installs the wheels `make gpu-wheels` put in .whl/ into a scratch folder
(never the system), unpacks the compile caches carried in
.gpu-cache/compile-cache.tar.gz, then runs stages a..f in the converging
order (lib/bench/gpucheck/plan.py), each in its own process under its own
time cap, never starting one that would overrun GPU_CHECK_BUDGET_S (default
540). Writes OUT/gpu_check.json, OUT/gpu_check.log, at most 4 plots and
OUT/compile-cache.tar.gz. DEVICE=cpu runs every stage's code path on tiny
shapes; STAGES=abc picks stages; PLAN=h200 prints the order and the stages a
check on that GPU would reach, and runs nothing.
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
    p.add_argument(
        "--stages", help="e.g. abc or a,c (default: never finished, then changed, then the rest)"
    )
    p.add_argument("--plan", metavar="GPU", help="print the plan for this GPU (h200, h100...)")
    p.add_argument("--cache", type=Path, help="carried compile caches (default .gpu-cache/...)")
    args = p.parse_args(argv)
    text = os.environ.get("GPU_CHECK_BUDGET_S") or str(plan.DEFAULT_BUDGET_S)
    try:
        budget = float(text)
    except ValueError:
        budget = -1.0
    if not budget > 0:
        raise ValueError(f"GPU_CHECK_BUDGET_S={text!r}: give the total time in seconds, e.g. 540")
    args.device = "cuda" if args.device == "auto" else args.device
    chosen = plan.parse_stages(args.stages)  # a bad STAGES fails before anything is installed
    if args.plan:
        return print_plan(args.plan, chosen, budget)
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(
            f"no CUDA device for torch {torch.__version__}: run this on a GPU "
            f"machine, or `make gpu-check DEVICE=cpu` to check the code paths"
        )
    from lib.bench.gpucheck.driver import check

    out = args.out or ROOT / "results" / f"gpu-check-{time.strftime('%Y%m%d-%H%M%S')}"
    from lib.bench.gpucheck.wheels import WHEEL_DIR

    result = check(args.device, out, args.stages, budget, args.wheels or WHEEL_DIR, args.cache)
    return 0 if all(s["status"] != "failed" for s in result["stages"].values()) else 1


def print_plan(kind: str, chosen: list[str] | None, budget: float) -> int:
    """The order and the stages a check on GPU `kind` would reach, from the
    records in docs/bench-data/<kind>/ and this tree's git history."""
    from lib.bench.gpucheck import record
    from lib.bench.gpucheck.driver import plan_text

    folder = record.BENCH_DATA / kind
    if not folder.is_dir():
        known = sorted(p.name for p in record.BENCH_DATA.iterdir() if p.is_dir())
        print(
            f"no records for {kind!r} in {folder}: every stage never finished (known: "
            f"{', '.join(known)})"
        )
    planned = plan.order_stages(record.history(kind), record.changed_since, chosen)
    print(f"gpu-check on {kind}:\n" + "\n".join(plan_text(planned, "cuda", budget)))
    return 0


if __name__ == "__main__":
    # Not lib.cli.run_script: it imports kconfiglib, which is installed later from .whl/.
    try:
        raise SystemExit(main(sys.argv[1:]))
    except (ValueError, RuntimeError) as err:
        print(f"error: {err}", file=sys.stderr)
        raise SystemExit(2) from None
