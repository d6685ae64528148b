"""Train the configured model: `make` / `make train`; `make continue` resumes.

Arguments are NAME=VALUE overrides (see lib/config/overrides.py); RESUME=1 resumes
results/latest, or results/<RUN_NAME> when RUN_NAME= is given, with the
configuration that run recorded in its config.txt.

Exit codes: 0 completed (or stopped at TRAIN_MAX_TIME), 1 failed (or stopped by
a signal with SAVE_CHECKPOINT off: nothing to resume), 2 a user error, 3
diverged, 75 (EXIT_RESUMABLE) stopped by SIGTERM, SIGINT or SIGUSR1 with a
checkpoint: requeue it and resume (`make continue`).
"""

from __future__ import annotations

import os
import sys
import traceback
from pathlib import Path
from typing import TYPE_CHECKING

from lib.run.signals import EXIT_RESUMABLE, STOP, TORCHRUN_ENV, Abandoned, follow_make

if __name__ == "__main__":  # first, before torch loads: from here on a stop signal stops cleanly
    STOP.install()
    follow_make()  # a signal sent to make's pid reaches this run too

from lib.atomic import DiskFullError
from lib.cli import run_script
from lib.config.overrides import split_args
from lib.config.run_config import RunConfig, load_run_config
from lib.data import DataError
from lib.matrix.grid import one_run
from lib.run.checkpoint import CheckpointError, load_checkpoint
from lib.run.rundir import RunDirError, RunLog, configured_results_root, find_run_dir
from lib.speed.allocator import AllocConfError, apply_alloc_conf
from lib.train.naming import create_run_dir, run_id

if TYPE_CHECKING:
    from lib.train.trainer import Trainer

EXIT = {"completed": 0, "stopped": 0, "diverged": 3, "failed": 1}


def open_run(args: list[str], create: bool = True):
    """(run config, run folder, checkpoint state or None) for a new or resumed run.

    RUN_DIR=<folder> (how the test matrix starts its runs) trains the run whose
    config.txt is there, resuming from its checkpoint when it has one. With
    create=False a new run's folder is not made yet (its folder is None).
    The run's folder is owned by this process from here on (lib/run/owner.py)."""
    from lib.run.rundir import claim_run, resume_point

    run_dirs = [a.partition("=")[2] for a in args if a.startswith("RUN_DIR=")]
    args = [a for a in args if not a.startswith("RUN_DIR=")]
    if run_dirs:
        run_dir = find_run_dir(Path(run_dirs[-1]).parent, Path(run_dirs[-1]).name)
        claim_run(run_dir, by_matrix=True)  # held until this process ends
        run = load_run_config(args, path=run_dir / "config.txt")
        ckpt = resume_point(run_dir, saving=bool(run.SAVE_CHECKPOINT))
        return run, run_dir, load_checkpoint(ckpt) if ckpt else None
    overrides, flags, _ = split_args(args)
    if not flags["RESUME"]:
        run = one_run(load_run_config(args), "make")
        if run.flags["DRY_RUN"] or not create:
            return run, None, None
        return run, create_run_dir(run), None
    name = dict(overrides).get("RUN_NAME")
    results = configured_results_root()
    run_dir = find_run_dir(results, name)
    claim_run(run_dir)  # refuses a run another live process trains
    run = load_run_config(args, path=run_dir / "config.txt")
    ckpt = resume_point(run_dir)  # None: killed before its first checkpoint, starts over
    return run, run_dir, load_checkpoint(ckpt) if ckpt else None


def main(args: list[str]) -> int:
    if "LOCAL_RANK" in os.environ:  # under torchrun: rank 0 opens the run, the others follow
        from lib.distributed import runtime as distributed

        env = distributed.from_environment()
        run, run_dir, state = env.follow_rank0(lambda: open_run(args), load_checkpoint)
        allocator_note = apply_alloc_conf(run.PYTORCH_CUDA_ALLOC_CONF)  # inherited: None
        env = env.for_run(run.distributed)
    else:
        run, run_dir, state = open_run(args, create=False)
        # Before anything starts CUDA here or in torchrun's workers (they inherit it).
        allocator_note = apply_alloc_conf(run.PYTORCH_CUDA_ALLOC_CONF)
        if run.flags["DRY_RUN"]:
            run_id(run)  # an invalid RUN_NAME is the same error as in a real run
            print(run.config_text + run.describe())
            return 0
        if run_dir is None:  # a new run: can it train here at all? (before its folder)
            from lib.estimate.verdict import refusal

            unfit = refusal(run, anyway=run.flags["YES"])
            if unfit:
                print(f"error: {unfit}", file=sys.stderr)
                return 2
        from lib.distributed import runtime as distributed  # torch import only for real runs

        if run.GPT2_USE_DDP:
            for key, value in TORCHRUN_ENV.items():  # torchrun forwards SIGUSR1 too
                os.environ.setdefault(key, value)
            # torchrun, one process per GPU
            distributed.relaunch(run.distributed, run.speed, __file__, args)
        run_dir = run_dir or create_run_dir(run)
        env = distributed.SINGLE
    log = RunLog(run_dir / "output.log") if env.is_main else distributed.QuietLog()
    STOP.saving = bool(run.SAVE_CHECKPOINT)  # what the stop signal's notice promises
    if allocator_note:
        log(allocator_note)
    trainer: Trainer | None = None  # its step says how far a failed run got
    try:
        from lib.train.trainer import Trainer

        trainer = Trainer(run, run_dir, log, resume=state, dist=env)
        if state:
            log(f"resuming {run_dir.name} from step {state['step']}")
        trainer.describe()
        summary = trainer.train()
    except Abandoned as err:  # a repeated stop signal before or after the loop
        log(f"stopped at once by a repeated {err}: nothing saved; the last checkpoint stays")
        if env.is_main:
            _record(
                run_dir,
                status="stopped",
                stop_signal=str(err),
                reason=(
                    f"{err} received again while stopping: stopped at once; resumes from the "
                    f"last checkpoint"
                ),
            )
        return EXIT_RESUMABLE if run.SAVE_CHECKPOINT else EXIT["failed"]
    except (DiskFullError, DataError, CheckpointError) as err:  # one paragraph says it all
        log(f"run failed: {err}")
        if env.is_main:
            _record_failure(run_dir, err, None if trainer is None else trainer.step)
        return EXIT["failed"]
    except Exception as err:
        log(f"run failed: {type(err).__name__}: {err}")
        log(traceback.format_exc())
        if env.is_main:
            _record_failure(run_dir, err, None if trainer is None else trainer.step)
        return EXIT["failed"]
    finally:
        log.close()
        distributed.teardown()
    if summary["status"] == "stopped" and trainer.stop_signal:  # resumable with a checkpoint
        return EXIT_RESUMABLE if trainer.checkpoints.enabled else EXIT["failed"]
    if env.is_main and run.LM_EVAL_AT_END and summary["status"] in ("completed", "stopped"):
        lm_eval_at_end(run_dir, run)
    return EXIT[summary["status"]]


def lm_eval_at_end(run_dir: Path, run: RunConfig) -> None:
    """LM_EVAL_AT_END: the finished run's scores on LM_EVAL_TASKS into its
    eval.json, as `make lm-eval` gives them; a failure is logged, and the run
    keeps its result (the training is done either way)."""
    from lib.eval.downstream import evaluate_run_tasks

    log = RunLog(run_dir / "output.log")
    checkpoint = "best" if (run_dir / "ckpt_best.pt").exists() else "latest"
    try:
        evaluate_run_tasks(run_dir, checkpoint, run, log=log)
    except Exception as err:  # the hub, a task, lm-eval itself: reported, never fatal
        log(f"lm-eval after training failed: {type(err).__name__}: {err}")
    finally:
        log.close()


def _record_failure(run_dir: Path, err: Exception, step: int | None = None) -> None:
    """Mark metrics.json failed with the error, and the step the run had done (its
    series end at the last evaluation), unless the record already says it all."""
    from lib.run.full_disk import error_text

    if getattr(err, "recorded", False):  # a metrics.json write on a full disk did
        return
    steps = {} if step is None else {"failed_at_step": step}
    _record(run_dir, status="failed", error=error_text(err), **steps)


def _record(run_dir: Path, **fields: str | int) -> None:
    """Set fields of metrics.json (made when the run died before writing it), keeping
    every other field: over the record's own bytes when a full disk leaves no room."""
    from lib.run.full_disk import set_fields

    path = run_dir / "metrics.json"
    failed = set_fields(path, fields)  # e.g. the disk is still full: output.log has the error
    if failed:
        print(f"could not record the run's status in {path}: {failed}", file=sys.stderr)


def main_or_stop(args: list[str]) -> int:
    try:
        return main(args)
    except Abandoned as err:  # a repeated signal while the run was being opened
        print(f"stopped by a repeated {err} before training began", file=sys.stderr)
        return EXIT_RESUMABLE


def exit_without_teardown(code: int) -> None:
    """A torchrun worker leaves without the interpreter's teardown: freeing
    gloo/DDP objects there can abort a finished rank ("terminate called without
    an active exception"). Everything is recorded and closed by now."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    try:
        run_script(
            main_or_stop,
            (RunDirError, CheckpointError, DataError, AllocConfError, DiskFullError),
            error_code=2,
        )
    except SystemExit as done:
        if "LOCAL_RANK" not in os.environ:
            raise
        exit_without_teardown(done.code if isinstance(done.code, int) else 1)
