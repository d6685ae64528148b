"""Evaluate a run or pretrained baselines: `make eval [RUN=<dir>] [CHECKPOINT=best|latest]`,
`make eval-baseline BASELINE_MODEL=<Hugging Face causal LM folder>`, and `make
eval-baselines` (every folder of CONFIG_EVAL_BASELINES's list).

The sets, stride and batch are the EVAL_* symbols of .config (without a
.config, those the run recorded in its config.txt), after NAME=VALUE overrides
such as SET="EVAL_WIKITEXT2=y EVAL_STRIDE=256". A run's results go to
<run>/eval.json, a baseline's to <results>/baseline-<folder name>/eval.json.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from lib.cli import run_script
from lib.config.run_config import load_run_config
from lib.data import DataError
from lib.paths import DOT_CONFIG as CONFIG
from lib.run.checkpoint import CheckpointError
from lib.run.rundir import RunDirError, run_folder


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--run", help="run folder (default: results/latest)")
    p.add_argument("--checkpoint", choices=["best", "latest"], default="best")
    p.add_argument("--baseline", help="Hugging Face causal LM folder to evaluate instead of a run")
    p.add_argument(
        "--baselines", action="store_true", help="evaluate CONFIG_EVAL_BASELINES's folders"
    )
    p.add_argument("overrides", nargs="*", help="NAME=VALUE configuration overrides")
    return p.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    from lib.eval.suite import evaluate_baseline, evaluate_run  # torch import after arg checks

    if args.baselines:
        from lib.eval.baseline_list import evaluate_listed

        evaluate_listed(load_run_config(args.overrides))
        return 0
    if args.baseline is not None:
        if not args.baseline:
            raise RunDirError(
                "BASELINE_MODEL= is empty: name a Hugging Face causal LM folder "
                "(config.json, model.safetensors and the tokenizer's files)"
            )
        evaluate_baseline(Path(args.baseline), load_run_config(args.overrides))
        return 0
    run_dir = run_folder(args.run)
    config = CONFIG if CONFIG.exists() else run_dir / "config.txt"
    evaluate_run(run_dir, args.checkpoint, load_run_config(args.overrides, path=config))
    return 0


if __name__ == "__main__":
    run_script(main, (RunDirError, CheckpointError, DataError, ValueError, RuntimeError))
