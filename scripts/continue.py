"""`make continue`: resume results/latest (or RUN_NAME=<id>): a test matrix
(its pending and interrupted runs; RETRY_FAILED=1 also retries failed ones)
or a single run from its last checkpoint (from step 0 when it was stopped
before its first one). A run or matrix that a live process owns is not
touched (lib/run/owner.py): a matrix's live runs are skipped, a live single run
or matrix launcher is refused. User errors end as one paragraph, exit code 2.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lib.cli import run_script  # noqa: E402
from lib.matrix.state import MatrixError, is_matrix  # noqa: E402
from lib.config.overrides import split_args  # noqa: E402
from lib.run.rundir import (RunDirError, check_run_name, claim_run,  # noqa: E402
                        configured_results_root, find_run_dir)


def main(argv: list[str]) -> int:
    overrides, flags, _ = split_args(argv)
    results = configured_results_root()
    name = dict(overrides).get("RUN_NAME")
    if name is not None:  # RUN_NAME= (empty) means results/latest, as without it
        name = check_run_name(name, results) if name else None
    target = results / (name or "latest")
    if is_matrix(target):
        from lib.matrix import launch

        if not target.resolve().is_relative_to(results.resolve()):
            raise MatrixError(f"{target} leads outside the results folder {results}: "
                              f"nothing was resumed")
        rest = [a for a in argv if not a.startswith(("RUN_NAME=", "RETRY_FAILED="))]
        return launch.resume(target.resolve(), rest, flags["RETRY_FAILED"])
    # A single run: refuse a bad or busy one before importing torch (seconds).
    claim_run(find_run_dir(results, name))  # held on by train.main below
    from lib.run.signals import STOP

    STOP.install()  # as train.py does first: a stop signal stops at a step, with a checkpoint
    import train  # scripts/train.py
    from lib.run.checkpoint import CheckpointError  # both import torch: only for a single run
    from lib.data import DataError

    try:
        return train.main_or_stop(["RESUME=1", *argv])
    except (CheckpointError, DataError) as err:
        raise RunDirError(str(err)) from None


if __name__ == "__main__":
    run_script(main, (MatrixError, RunDirError), error_code=2)
