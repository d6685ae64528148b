"""lm-evaluation-harness tasks on a run: `make lm-eval [RUN=<dir>]
[CHECKPOINT=best|latest] [TASKS=hellaswag,arc_easy,...]`.

TASKS defaults to CONFIG_LM_EVAL_TASKS. LM_EVAL_LIMIT, LM_EVAL_INCLUDE_PATH,
the batch (EVAL_BATCH_SIZE), device and precision come from .config (without
a .config, from the run's config.txt) after NAME=VALUE overrides such as
SET="LM_EVAL_LIMIT=100". The scores go to <run>/eval.json ("lm_eval").
`make lm-eval BASELINE_MODEL=<folder>` scores a Hugging Face causal LM folder
through lm-eval's own `hf` model, into <results>/baseline-<name>/eval.json.

Not named lm_eval.py: Python puts scripts/ first on sys.path, where such a
file would hide the lm_eval package from every script here.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from lib.cli import run_script
from lib.config.run_config import load_run_config
from lib.data import DataError
from lib.paths import DOT_CONFIG
from lib.run.checkpoint import CheckpointError
from lib.run.rundir import RunDirError, run_folder


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--run", help="run folder (default: results/latest)")
    p.add_argument("--checkpoint", choices=["best", "latest"], default="best")
    p.add_argument("--tasks", help="comma-separated lm-eval tasks (default: CONFIG_LM_EVAL_TASKS)")
    p.add_argument("--baseline", help="a Hugging Face causal LM folder instead of a run")
    p.add_argument("overrides", nargs="*", help="NAME=VALUE configuration overrides")
    return p.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    if args.baseline:
        from lib.eval.downstream import evaluate_baseline_tasks

        evaluate_baseline_tasks(Path(args.baseline), load_run_config(args.overrides), args.tasks)
        return 0
    run_dir = run_folder(args.run)
    config = DOT_CONFIG if DOT_CONFIG.exists() else run_dir / "config.txt"
    cfg = load_run_config(args.overrides, path=config)
    from lib.eval.downstream import evaluate_run_tasks  # torch and lm-eval after the checks

    evaluate_run_tasks(run_dir, args.checkpoint, cfg, args.tasks)
    return 0


if __name__ == "__main__":
    run_script(main, (RunDirError, CheckpointError, DataError, ValueError, RuntimeError))
