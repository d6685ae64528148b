"""Train the configured model: `make` / `make train`; `make continue` resumes.

Arguments are NAME=VALUE overrides (see lib/overrides.py); RESUME=1 resumes
results/latest, or results/<RUN_NAME> when RUN_NAME= is given, with the
configuration that run recorded in its config.txt.
"""
from __future__ import annotations

import os
import sys
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lib.checkpoint import CheckpointError, load_checkpoint  # noqa: E402
from lib.cli import run_script  # noqa: E402
from lib.config import load_run_config  # noqa: E402
from lib.kconfig import ConfigError  # noqa: E402
from lib.matrix.grid import is_multiple  # noqa: E402
from lib.data import DataError  # noqa: E402
from lib.overrides import split_args  # noqa: E402
from lib.rundir import RunDirError, RunLog, configured_results_root, create_run_dir, find_run_dir  # noqa: E402

EXIT = {"completed": 0, "stopped": 0, "diverged": 3, "failed": 1}


def refuse_multiple(run):
    """A configuration that enables several runs is the test matrix's, not make's."""
    if is_multiple(run):
        raise ConfigError(["this .config enables several optimizers, pruning settings, "
                           "attention variants, models or an ablation list: train them "
                           "with `make test-matrix` (`make test-matrix-dry-run` shows the "
                           "runs), or choose one of each in `make menuconfig`"])
    return run


def open_run(args: list[str], create: bool = True):
    """(run config, run folder, checkpoint state or None) for a new or resumed run.

    RUN_DIR=<folder> (how the test matrix starts its runs) trains the run whose
    config.txt is there, resuming from its checkpoint when it has one. With
    create=False a new run's folder is not made yet (its folder is None)."""
    run_dirs = [a.partition("=")[2] for a in args if a.startswith("RUN_DIR=")]
    args = [a for a in args if not a.startswith("RUN_DIR=")]
    if run_dirs:
        run_dir = find_run_dir(Path(run_dirs[-1]).parent, Path(run_dirs[-1]).name)
        ckpt = run_dir / "ckpt_latest.pt"
        return (load_run_config(args, path=run_dir / "config.txt"), run_dir,
                load_checkpoint(ckpt) if ckpt.exists() else None)
    overrides, flags, _ = split_args(args)
    if not flags["RESUME"]:
        run = refuse_multiple(load_run_config(args))
        if run.flags["DRY_RUN"] or not create:
            return run, None, None
        return run, create_run_dir(run), None
    name = dict(overrides).get("RUN_NAME")
    results = configured_results_root()
    run_dir = find_run_dir(results, name)
    run = load_run_config(args, path=run_dir / "config.txt")
    return run, run_dir, load_checkpoint(run_dir / "ckpt_latest.pt")


def main(args: list[str]) -> int:
    if "LOCAL_RANK" in os.environ:  # under torchrun: rank 0 opens the run, the others follow
        from lib import distributed

        env = distributed.from_environment()
        run, run_dir, state = env.follow_rank0(lambda: open_run(args), load_checkpoint)
        env = env.for_run(run)
    else:
        run, run_dir, state = open_run(args, create=False)
        if run.flags["DRY_RUN"]:
            print(run.config_text + run.describe())
            return 0
        from lib import distributed  # torch import only for real runs

        if run.get("GPT2_USE_DDP"):
            distributed.relaunch(run, __file__, args)  # torchrun, one process per GPU
        run_dir = run_dir or create_run_dir(run)
        env = distributed.SINGLE
    log = RunLog(run_dir / "output.log") if env.is_main else distributed.QuietLog()
    try:
        from lib.trainer import Trainer

        trainer = Trainer(run, run_dir, log, resume=state, dist=env)
        if state:
            log(f"resuming {run_dir.name} from step {state['step']}")
        trainer.describe()
        summary = trainer.train()
    except Exception as err:
        log(f"run failed: {type(err).__name__}: {err}")
        log(traceback.format_exc())
        if env.is_main:
            _record_failure(run_dir, err)
        return EXIT["failed"]
    finally:
        log.close()
        distributed.teardown()
    return EXIT[summary["status"]]


def _record_failure(run_dir: Path, err: Exception) -> None:
    import json

    from lib.atomic import write_json_atomic

    path = run_dir / "metrics.json"
    try:
        metrics = json.loads(path.read_text()) if path.exists() else {}
    except ValueError:
        metrics = {}
    metrics.update(status="failed", error=f"{type(err).__name__}: {err}")
    write_json_atomic(path, metrics)


if __name__ == "__main__":
    run_script(main, (RunDirError, CheckpointError, DataError), error_code=2)
