"""Train the configured model: `make` / `make train`; `make continue` resumes.

Arguments are NAME=VALUE overrides (see lib/overrides.py); RESUME=1 resumes
results/latest, or results/<RUN_NAME> when RUN_NAME= is given, with the
configuration that run recorded in its config.txt.
"""
from __future__ import annotations

import sys
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lib.checkpoint import CheckpointError, load_checkpoint  # noqa: E402
from lib.cli import run_script  # noqa: E402
from lib.config import CONFIG, load_run_config  # noqa: E402
from lib.data import DataError  # noqa: E402
from lib.overrides import split_args  # noqa: E402
from lib.rundir import RunDirError, RunLog, create_run_dir, find_run_dir, results_root  # noqa: E402

EXIT = {"completed": 0, "stopped": 0, "diverged": 3, "failed": 1}


def open_run(args: list[str]):
    """(run config, run folder, checkpoint state or None) for a new or resumed run."""
    overrides, flags, _ = split_args(args)
    if not flags["RESUME"]:
        run = load_run_config(args)
        if run.flags["DRY_RUN"]:
            return run, None, None
        return run, create_run_dir(run), None
    name = dict(overrides).get("RUN_NAME")
    results = results_root(load_run_config([])) if CONFIG.exists() else Path("results")
    run_dir = find_run_dir(results, name)
    run = load_run_config(args, path=run_dir / "config.txt")
    return run, run_dir, load_checkpoint(run_dir / "ckpt_latest.pt")


def main(args: list[str]) -> int:
    run, run_dir, state = open_run(args)
    if run_dir is None:  # DRY_RUN=1
        print(run.config_text + run.describe())
        return 0
    log = RunLog(run_dir / "output.log")
    try:
        from lib.trainer import Trainer  # torch import only for real runs

        trainer = Trainer(run, run_dir, log, resume=state)
        if state:
            log(f"resuming {run_dir.name} from step {state['step']}")
        trainer.describe()
        summary = trainer.train()
    except Exception as err:
        log(f"run failed: {type(err).__name__}: {err}")
        log(traceback.format_exc())
        _record_failure(run_dir, err)
        return EXIT["failed"]
    finally:
        log.close()
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
