"""`make continue`: resume results/latest (or RUN_NAME=<id>): a test matrix
(its pending and interrupted runs; RETRY_FAILED=1 also retries failed ones)
or a single run from its last checkpoint."""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lib.cli import run_script  # noqa: E402
from lib.matrix.state import MatrixError, is_matrix  # noqa: E402
from lib.overrides import split_args  # noqa: E402
from lib.rundir import configured_results_root  # noqa: E402


def main(argv: list[str]) -> int:
    overrides, flags, _ = split_args(argv)
    results = configured_results_root()
    name = dict(overrides).get("RUN_NAME")
    target = results / (name or "latest")
    if is_matrix(target):
        from lib.matrix import launch

        rest = [a for a in argv if not a.startswith(("RUN_NAME=", "RETRY_FAILED="))]
        return launch.resume(target.resolve(), rest, flags["RETRY_FAILED"])
    import train  # scripts/train.py: a single run

    return train.main(["RESUME=1", *argv])


if __name__ == "__main__":
    run_script(main, (MatrixError,), error_code=2)
