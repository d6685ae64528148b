"""lm-evaluation-harness tasks on a run: `make lm-eval [RUN=<dir>]
[CHECKPOINT=best|latest] [TASKS=hellaswag,arc_easy,...]`.

TASKS defaults to CONFIG_LM_EVAL_TASKS. LM_EVAL_LIMIT, LM_EVAL_INCLUDE_PATH,
the batch (EVAL_BATCH_SIZE), device and precision come from .config (without
a .config, from the run's config.txt) after NAME=VALUE overrides such as
SET="LM_EVAL_LIMIT=100". The scores go to <run>/eval.json ("lm_eval").

Not named lm_eval.py: Python puts scripts/ first on sys.path, where such a
file would hide the lm_eval package from every script here.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lib.cli import run_script  # noqa: E402
from lib.config.run_config import load_run_config  # noqa: E402
from lib.data import DataError  # noqa: E402
from lib.paths import DOT_CONFIG  # noqa: E402
from lib.run.checkpoint import CheckpointError  # noqa: E402
from lib.run.rundir import RunDirError, configured_results_root, run_folder  # noqa: E402


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--run", help="run folder (default: results/latest)")
    p.add_argument("--checkpoint", choices=["best", "latest"], default="best")
    p.add_argument("--tasks", help="comma-separated lm-eval tasks (default: CONFIG_LM_EVAL_TASKS)")
    p.add_argument("overrides", nargs="*", help="NAME=VALUE configuration overrides")
    return p.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    run_dir = run_folder(args.run, configured_results_root())
    config = DOT_CONFIG if DOT_CONFIG.exists() else run_dir / "config.txt"
    cfg = load_run_config(args.overrides, path=config)
    from lib.eval.downstream import evaluate_run_tasks  # torch and lm-eval after the checks

    evaluate_run_tasks(run_dir, args.checkpoint, cfg, args.tasks)
    return 0


if __name__ == "__main__":
    run_script(main, (RunDirError, CheckpointError, DataError, ValueError, RuntimeError))
