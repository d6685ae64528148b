"""`make continue`: resume results/latest, RUN_NAME=<id> under the results folder
(SET="RESULTS_DIR=..." names another one, as when the run was started), or
RUN=<dir>, a run or matrix folder anywhere: a test matrix (its pending and
interrupted runs; RETRY_FAILED=1 also retries failed ones) or a single run from
its last checkpoint (from step 0 when it was stopped before its first one; a
run trained with SAVE_CHECKPOINT off is refused: it has none).

A run resumes with its own configuration (its config.txt) plus the overrides
given; .config is not read beyond its RESULTS_DIR line (not at all with
RUN=<dir>), so a broken .config does not stop it. results/latest and RUN_NAME=
must stay inside the results folder, even through links; RUN=<dir> may be
anywhere. A completed run is left untouched ("already completed")
unless MAX_ITERS is raised past the steps it trained. A run or matrix that a
live process owns is not touched (lib/run/owner.py): a matrix's live runs are
skipped, a live single run or matrix launcher is refused. User errors end as
one paragraph, exit code 2.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from lib.cli import run_script
from lib.config.overrides import split_args
from lib.jobs.state import MatrixError, is_matrix
from lib.run.resume import already_completed, not_resumable
from lib.run.rundir import (
    RunDirError,
    check_run_name,
    claim_run,
    configured_results_root,
    find_run_dir,
    run_folder,
    within_results,
)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--run", help="the run or matrix folder to resume (RUN=<dir>)")
    args, argv = parser.parse_known_args(argv)
    overrides, flags, _ = split_args(argv)
    name = dict(overrides).get("RUN_NAME")
    if args.run and name:
        raise RunDirError(
            f"RUN={args.run} and RUN_NAME={name}: give one of them (RUN= is a "
            f"folder anywhere, RUN_NAME= a name under the results folder)"
        )
    rest = [a for a in argv if not a.startswith(("RUN_NAME=", "RETRY_FAILED="))]
    if args.run:  # the user's choice, anywhere: it needs no .config
        target = Path(args.run)
        if is_matrix(target):
            return resume_matrix(target.resolve(), rest, flags["RETRY_FAILED"])
        run_dir = run_folder(target)
    else:  # results/latest or RUN_NAME=<name>: resolved once, kept in the results folder
        results = configured_results_root(overrides)
        name = check_run_name(name, results) if name else None  # RUN_NAME= is latest too
        target = results / (name or "latest")
        if is_matrix(target):
            root = within_results(target, results, "nothing was resumed", "RUN=<dir>")
            return resume_matrix(root, rest, flags["RETRY_FAILED"])
        run_dir = find_run_dir(results, name)
    # A single run: refuse a bad, busy or finished one before importing torch (seconds).
    claim_run(run_dir)  # held on by train.main below
    done = already_completed(run_dir, rest)
    if done:
        print(done)
        return 0
    refused = not_resumable(run_dir, rest)  # SAVE_CHECKPOINT off: nothing to resume
    if refused:
        raise RunDirError(refused)
    from lib.run.signals import STOP, follow_make

    STOP.install()  # as train.py does first: a stop signal stops at a step, with a checkpoint
    follow_make()
    import train  # scripts/train.py

    from lib.data import DataError
    from lib.run.checkpoint import CheckpointError  # both import torch: only for a single run

    try:  # RUN_DIR: train.py resumes the run in that folder with its config.txt
        return train.main_or_stop([f"RUN_DIR={run_dir}", *rest])
    except (CheckpointError, DataError) as err:
        raise RunDirError(str(err)) from None


def resume_matrix(root: Path, rest: list[str], retry_failed: bool) -> int:
    from lib.matrix import launch

    return launch.resume(root, rest, retry_failed)


if __name__ == "__main__":
    run_script(main, (MatrixError, RunDirError), error_code=2)
