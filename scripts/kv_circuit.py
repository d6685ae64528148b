"""`make kv-circuit [RUN=] [CHECKPOINT=best|latest] [SET=...]`: the KV
feature-circuit analysis (MECHINT_KV, lib/eval/kv_circuit.py) of a finished
run's checkpoint, into its kv_circuit/ folder and metrics.json, with its
config.txt (MECHINT_KV on) and the command's overrides."""

from __future__ import annotations

import argparse

from lib.cli import run_script
from lib.config.run_config import load_run_config
from lib.run.checkpoint import CheckpointError
from lib.run.rundir import RunDirError, claim_run, run_folder


def main(argv: list[str]) -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--run", help="run folder (default: results/latest)")
    p.add_argument("--checkpoint", choices=["best", "latest"], default="best")
    p.add_argument("overrides", nargs="*", help="NAME=VALUE configuration overrides")
    args = p.parse_intermixed_args(argv)
    run_dir = run_folder(args.run)
    # the command asks for the analysis: on, whatever the run trained with
    run = load_run_config(["MECHINT_KV=y", *args.overrides], path=run_dir / "config.txt")
    claim_run(run_dir)  # not while it trains: both would write its metrics.json
    from lib.bench.inference import load_model
    from lib.data.loader import BatchLoader
    from lib.data.prepared import ensure_prepared
    from lib.eval.kv_circuit import analyse_run
    from lib.speed.precision import resolve_device

    device = resolve_device(run.DEVICE)
    model, step = load_model(run_dir, args.checkpoint, device)
    data = ensure_prepared(run.data)
    loaders = {
        split: BatchLoader(
            data, split, run.BATCH_SIZE, model.config.block_size, device, run.TRAIN_SEED
        )
        for split in ("train", "val")
    }
    source = f"ckpt_{args.checkpoint}.pt (step {step})"
    analyse_run(run.eval, run.speed, run.train, model, loaders, run_dir, print, source)
    print(f"saved in {run_dir / 'kv_circuit'} and {run_dir / 'metrics.json'}")


if __name__ == "__main__":
    run_script(main, (RunDirError, CheckpointError, ValueError))
