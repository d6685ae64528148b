"""What a trainer is made of, assembled in one place: the device, the prepared
data and its batches, the batch plan (configured, fitted or resumed), the
training stack (lib/train/build.py), and the parts that evaluate, checkpoint,
stop early, report to a tuning study, record, monitor, back up, track and
analyse the run; with the record and the checkpoint state they make together.

The order of assembly is fixed: the model's initialisation draws from the
generator seeded first, so the same order gives the same run and an exact
resume. The trainer (lib/train/trainer.py) is the loop over these parts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from lib.data import load_meta
from lib.data.loader import BatchLoader
from lib.data.prepared import ensure_prepared
from lib.data.valchars import per_char_record
from lib.distributed.runtime import DistEnv
from lib.estimate.fit import BatchPlan, plan_batch
from lib.hardware.devices import describe_device
from lib.observe.monitor import build_monitor
from lib.observe.tracking import Tracker
from lib.run import record
from lib.run.backup import Backup
from lib.run.checkpoint import seed_everything
from lib.run.checkpointer import Checkpointer
from lib.run.metrics import LogField, RunMetrics
from lib.speed.precision import resolve_device
from lib.train.build import Training, build_training
from lib.train.early_stop import EarlyStop
from lib.train.evaluator import Evaluator
from lib.train.fallback import FirstSteps
from lib.train.hooks import Analysis, RunContext
from lib.train.hooks import start as start_analyses
from lib.train.losses import PendingLosses
from lib.train.records import batch_record
from lib.train.schedule import schedule_settings
from lib.train.steplog import StepLog
from lib.train.trial import TrialReport

if TYPE_CHECKING:
    from lib.config.run_config import RunConfig


@dataclass(eq=False)
class Parts:
    run: RunConfig  # as the batch plan fitted it (HYPER_PARAM_AUTO)
    run_dir: Path
    log: Callable[[str], None]
    dist: DistEnv
    device: torch.device
    meta: dict[str, Any]  # the prepared data's meta.json
    batch_plan: BatchPlan
    training: Training  # model, speed options, optimizer, pruner, step
    loaders: dict[str, BatchLoader]  # "train", "val"
    evaluator: Evaluator
    checkpoints: Checkpointer
    early_stop: EarlyStop  # val loss is averaged over ranks: they agree
    trial: TrialReport  # a tuning study's trial, or inactive
    metrics: RunMetrics
    monitor: Any
    backup: Backup
    tracker: Tracker
    analyses: list[Analysis]  # samples, inference figures, K/V circuit (lib/train/hooks.py)
    first_steps: FirstSteps  # compile and out-of-memory fallbacks
    losses: PendingLosses  # read in one sync per log step (losses.py)
    steplog: StepLog

    def summary(
        self, status: str, step: int, reason: str | None, extra: dict[str, Any]
    ) -> dict[str, Any]:
        """metrics.json's summary after `step` steps: every part's record."""
        t, static = self.training, self.metrics.static
        return self.metrics.summary(
            status,
            step,
            step * static["tokens_per_iter"],
            {
                "reason": reason,
                **t.summary(self.run),
                **record.end_figures(
                    static,
                    self.device,
                    t.model.flops_per_token(t.config.block_size),
                    self.metrics.tokens_per_sec,  # of all ranks
                    describe_device(self.device).peak_flops_16bit,
                ),
                "monitor": self.monitor.write(),
                "trackers": self.tracker.record(),  # those in effect
                **extra,
                **self.trial.record(),
            },
        )

    def state_dict(self, step: int, rngs: list[Any], parts: dict[str, Any]) -> dict[str, Any]:
        """A checkpoint: `parts` (the stack's, lib/train/build.py) and every rank's
        RNGs, with the data positions and records an exact resume needs."""
        plan = self.batch_plan
        return {
            "step": step,
            "family": self.run.MODEL,
            "tokenizer": self.meta["tokenizer"],
            **parts,
            "rng_ranks": rngs,
            "rng": rngs[0],
            "batch": {"batch_size": plan.batch_size, "accumulation": plan.accumulation},
            "loaders": {k: loader.state_dict() for k, loader in self.loaders.items()},
            "metrics": self.metrics.state_dict(),
            "early_stop": self.early_stop.state_dict(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.training.load_state_dict(state, self.dist)
        for k, loader in self.loaders.items():
            loader.load_state_dict(state["loaders"][k])
        self.metrics.load_state_dict(state["metrics"])
        self.early_stop.load_state_dict(state.get("early_stop"))


def build_parts(
    run: RunConfig,
    run_dir: Path,
    log: Callable[[str], None],
    resume: dict[str, Any] | None,
    dist: DistEnv,
    log_fields: Callable[[], dict[str, LogField]],
) -> Parts:
    """Every part, in the order that makes a run reproducible (module docstring).
    log_fields: the fields of the training stack in use (a fallback replaces it)."""
    seed_everything(run.TRAIN_SEED)
    device = dist.place(resolve_device(run.DEVICE))
    data_dir = dist.main_first(lambda: ensure_prepared(run.data, log))
    meta = load_meta(data_dir)
    info = describe_device(device)
    # Micro-batch and accumulation: as configured, fitted (HYPER_PARAM_AUTO) or resumed.
    run, plan = plan_batch(
        run, info, dist.world_size, meta["vocab_size"], (resume or {}).get("batch")
    )
    # model -> speed options -> optimizer -> pruner -> step (lib/train/build.py)
    training = build_training(run, device, meta["vocab_size"], dist=dist, warm=True)
    block, pin = training.config.block_size, training.speed.pin_memory
    loaders = {
        split: BatchLoader(
            data_dir,
            split,
            plan.batch_size,
            block,
            device,
            run.TRAIN_SEED,
            dist.rank,
            dist.world_size,
            pin,
        )
        for split in ("train", "val")
    }
    evaluator = Evaluator(run.train, dist.mean)
    checkpoints = Checkpointer.from_run(run.run, run.train)
    early_stop = EarlyStop.from_settings(run.train)
    trial = TrialReport.from_run_dir(run_dir, dist.is_main)
    metrics = RunMetrics(
        run_dir / "metrics.json",
        record.static_record(
            run,
            run_dir,
            meta,
            info,
            dist.world_size,
            training.record(),
            {
                "lr_schedule": schedule_settings(run.train),
                "batch_plan": plan.as_dict(),
                "checkpoints": checkpoints.record(),
            },
            batch_record(run, meta["vocab_size"], plan, info, log),
            dist.main_first(lambda: per_char_record(data_dir, meta)),  # counted once
        ),
        write=dist.is_main,
    )
    monitor = build_monitor(run.monitor, device, run_dir, log, dist.is_main)
    backup = Backup.from_run(run.run, run_dir, log, dist.is_main)
    tracker = Tracker(
        run.observe, dict(run.values), run_dir, log, dist.is_main, resumed=resume is not None
    )  # off by default
    analyses = start_analyses(RunContext(run, run_dir, log, dist.is_main, meta["tokenizer"]))
    first_steps, losses = FirstSteps(run.train, run.speed, dist.active), PendingLosses(dist.mean)
    steplog = StepLog(run.train, metrics, tracker, log_fields, log, device, dist.is_main)
    return Parts(
        run, run_dir, log, dist, device, meta, plan, training, loaders, evaluator,
        checkpoints, early_stop, trial, metrics, monitor, backup, tracker, analyses,
        first_steps, losses, steplog,
    )  # fmt: skip
