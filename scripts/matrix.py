"""`make test-matrix` (plan and train the grid .config enables),
`make test-matrix-dry-run`, `make test-rerun TARGET=<run-id>`, `make sweep` and
`make tune` (the configuration in .config alone: its study, then its run at the
best values; lib/tune/);
`outputs RUN_DIR=<matrix>/<run-id> --make=inference|lm-eval`: what a reused run
lacks, made on its checkpoint (the matrix starts it, lib/jobs/outputs.py).

Arguments are NAME=VALUE overrides applied to every run (MAX_ITERS=, TIME=,
PARALLEL_JOBS=, DRY_RUN=1, YES=1); `rerun` takes the run id first.
"""

from __future__ import annotations

import argparse
import functools
from pathlib import Path

from lib.cli import run_script
from lib.jobs import outputs
from lib.jobs.state import MatrixError
from lib.matrix import launch, plan, sweep
from lib.run.rundir import configured_results_root
from lib.run.signals import follow_make


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("command", choices=["run", "rerun", "sweep", "tune", "job", "outputs"])
    p.add_argument("--launcher", default="", help="job: command words that start the ranks")
    p.add_argument("--sweep", default="", help="sweep: SYMBOL=v1,v2 or SYMBOL=lo..hi[:log] words")
    p.add_argument("--sweep-file", help="sweep: sweeps/<name> or a path")
    p.add_argument("--mode", default="grid", help="sweep: grid or random")
    p.add_argument("--trials", type=int, default=0, help="sweep: runs to draw in random mode")
    p.add_argument("--seed", type=int, default=0, help="sweep: random mode's seed")
    p.add_argument("--target", help="rerun: the run id to train again")
    p.add_argument("--matrix", help="rerun: the matrix folder name (default: results/latest)")
    p.add_argument(
        "--make",
        action="append",
        default=[],
        choices=list(outputs.LABELS),
        help="outputs: what to make for the reused run",
    )
    p.add_argument("--gpu", help="a dry run's estimates for a known GPU (GPU=H100)")
    p.add_argument("overrides", nargs="*", help="NAME=VALUE overrides for every run")
    args = p.parse_intermixed_args(argv)
    follow_make()  # a signal sent to make's pid reaches the matrix (it stops its runs) too
    show = functools.partial(plan.show, gpu=args.gpu)
    if args.command == "run":
        return launch.start(args.overrides, launch.ask, show)
    if args.command == "tune":  # tuning on unless TUNE=/SET= says otherwise
        return launch.start(["MATRIX_TUNE=y", *args.overrides], launch.ask, show, one=True)
    if args.command == "sweep":
        if bool(args.sweep) == bool(args.sweep_file):
            p.error('sweep needs SWEEP="SYMBOL=v1,v2 ..." or SWEEP_FILE=<name>, not both')
        plan_ = (
            sweep.from_file(args.sweep_file)
            if args.sweep_file
            else sweep.parse(args.sweep, args.mode, args.trials, args.seed)
        )
        return launch.start(args.overrides, launch.ask, show, plan_)
    if args.command in ("job", "outputs"):  # RUN_DIR=<run folder>
        run_dirs = [a.partition("=")[2] for a in args.overrides if a.startswith("RUN_DIR=")]
        if not run_dirs:
            p.error(f"{args.command} needs RUN_DIR=<run folder>")
        rest = [a for a in args.overrides if not a.startswith("RUN_DIR=")]
        if args.command == "outputs":
            return launch.outputs(Path(run_dirs[0]), tuple(args.make))
        return launch.job(Path(run_dirs[0]), args.launcher.split(), rest)
    if not args.target:
        p.error("rerun needs TARGET=<run-id>")
    root = launch.find(configured_results_root(), args.matrix)
    return launch.rerun(root, args.target, args.overrides)


if __name__ == "__main__":
    run_script(main, (MatrixError,), error_code=2)
