"""Save a trained run as a Hugging Face folder with a model card (vanilla GPT-2 in
transformers' GPT-2 layout, other models with their code, for trust_remote_code):
`make export [RUN=<dir>] [CHECKPOINT=best|latest] [EXPORT_DIR=<dir>]` (default <run>/hf/)."""

from __future__ import annotations

import argparse

from lib.cli import run_script
from lib.run.checkpoint import CheckpointError
from lib.run.rundir import RunDirError, run_folder


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--run", help="run folder (default: results/latest)")
    p.add_argument("--checkpoint", choices=["best", "latest"], default="best")
    p.add_argument("--out", help="output folder (default: <run>/hf)")
    args = p.parse_args(argv)
    from lib.model.export import export_run  # torch import after arg checks

    export_run(run_folder(args.run), args.checkpoint, args.out)
    return 0


if __name__ == "__main__":
    run_script(main, (RunDirError, CheckpointError, ValueError))
