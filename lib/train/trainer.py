"""The training loop every model family uses, nanoGPT's loop over parts that
answer for themselves: the stack (lib/train/build.py) steps, the evaluator and
the checkpointer say when they are due, each part reports its log fields and
record. Stops at MAX_ITERS, at TRAIN_MAX_TIME, on a stop signal (SIGTERM, SIGINT,
SIGUSR1; lib/run/signals.py), both at a step boundary with a checkpoint (none
with SAVE_CHECKPOINT off), or on divergence (the last good checkpoint stays).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from lib.bench.inference import inference_at_end
from lib.data import load_meta
from lib.data.loader import BatchLoader
from lib.data.prepared import ensure_prepared
from lib.data.valchars import per_char_record
from lib.distributed.runtime import SINGLE, DistEnv
from lib.estimate.fit import plan_batch
from lib.eval.kv_circuit_records import kv_circuit_at_end
from lib.eval.samples import SampleLog
from lib.hardware.devices import describe_device
from lib.hardware.precision import resolve_device
from lib.observe.monitor import CPU_FILE, GPU_FILE, build_monitor
from lib.observe.tracking import Tracker
from lib.run import record
from lib.run.backup import Backup, remove_run_temps
from lib.run.checkpoint import restore_rng, rng_state, seed_everything
from lib.run.checkpointer import Checkpointer
from lib.run.metrics import RunMetrics
from lib.run.signals import STOP, Abandoned
from lib.train.build import build_training
from lib.train.early_stop import EarlyStop
from lib.train.evaluator import Evaluator
from lib.train.fallback import FirstSteps, retrying
from lib.train.losses import PendingLosses
from lib.train.records import batch_record
from lib.train.schedule import lr_schedule, schedule_settings
from lib.train.steplog import StepLog
from lib.train.trial import TrialReport

if TYPE_CHECKING:
    from lib.config.run_config import RunConfig

# What the run's own process writes atomically in its folder: the temporaries a killed
# write of these leaves are the run's to remove (config.txt, eval.json have other writers).
RUN_FILES = ("ckpt_latest.pt", "ckpt_best.pt", "metrics.json", GPU_FILE, CPU_FILE)


class Trainer:
    def __init__(
        self,
        run: RunConfig,
        run_dir: Path,
        log: Callable[[str], None],
        resume: dict[str, Any] | None = None,
        dist: DistEnv = SINGLE,
    ):
        self.run_dir, self.log, self.dist = Path(run_dir), log, dist
        seed_everything(run.TRAIN_SEED)
        self.device = dist.place(resolve_device(run.DEVICE))
        data_dir = dist.main_first(lambda: ensure_prepared(run, log))
        self.meta = meta = load_meta(data_dir)
        info = describe_device(self.device)
        # Micro-batch and accumulation: as configured, fitted (HYPER_PARAM_AUTO) or resumed.
        run, self.batch_plan = plan_batch(
            run, info, dist.world_size, meta["vocab_size"], (resume or {}).get("batch")
        )
        # model -> speed options -> optimizer -> pruner -> step (lib/train/build.py)
        self.run, self.training = (
            run,
            build_training(run, self.device, meta["vocab_size"], dist=dist, warm=True),
        )
        block, pin = self.training.config.block_size, self.training.speed.pin_memory
        self.loaders = {
            split: BatchLoader(
                data_dir,
                split,
                self.batch_plan.batch_size,
                block,
                self.device,
                run.TRAIN_SEED,
                dist.rank,
                dist.world_size,
                pin,
            )
            for split in ("train", "val")
        }
        self.evaluator, self.checkpoints = Evaluator(run, dist.mean), Checkpointer.from_run(run)
        self.early_stop = EarlyStop.from_run(run)  # val loss is averaged: ranks agree
        self.trial = TrialReport.from_run_dir(self.run_dir, dist.is_main)  # a tuning trial
        self.pruned: str | None = None  # why the study pruned this trial
        self.metrics = RunMetrics(
            self.run_dir / "metrics.json",
            record.static_record(
                run,
                self.run_dir,
                meta,
                info,
                dist.world_size,
                self.training.record(),
                {
                    "lr_schedule": schedule_settings(run),
                    "batch_plan": self.batch_plan.as_dict(),
                    "checkpoints": self.checkpoints.record(),
                },
                batch_record(run, meta["vocab_size"], self.batch_plan, info, log),
                dist.main_first(lambda: per_char_record(data_dir, meta)),  # counted once
            ),
            write=dist.is_main,
        )
        self.monitor = build_monitor(run, self.device, self.run_dir, log, dist.is_main)
        self.backup = Backup.from_run(run, self.run_dir, log, dist.is_main)
        self.tracker = Tracker(
            run,
            self.run_dir,
            log,
            dist.is_main,  # off by default
            resumed=resume is not None,
        )
        self.samples = SampleLog(run, self.run_dir, meta["tokenizer"], log, dist.is_main)
        self.first_steps = FirstSteps(run, dist.active)  # compile and out-of-memory fallbacks
        self.losses = PendingLosses(dist.mean)  # read in one sync per log step (losses.py)
        self.steplog = StepLog(
            run,
            self.metrics,
            self.tracker,
            lambda: self.training.log_fields(),
            log,
            self.device,
            dist.is_main,
        )
        self.step = 0
        self.stop_signal: str | None = None  # the signal that stopped the run
        self.abandoned = False  # stopped at once by a repeated signal: nothing saved
        if resume:
            self._restore(resume)

    def describe(self) -> None:
        for line in record.describe(self.metrics.static, self.training.config, self.meta) + [
            self.run.describe(self.dist.world_size),
            self.batch_plan.describe(),
            *self.training.describe(),
        ]:
            self.log(line)

    def train(self) -> dict[str, Any]:
        """Train to MAX_ITERS, or until a stop (module docstring)."""
        with STOP.handling():
            return self._finish(*self._loop())

    def _loop(self) -> tuple[str, str | None]:
        """Run the steps; (status, reason)."""
        total, schedule, started = self.run.GPT2_MAX_ITERS, lr_schedule(self.run), time.monotonic()
        self.steplog.open(self.step)
        self.monitor.start()
        try:
            while self.step < total:
                # Stops happen here only, between steps: the checkpoint then holds
                # exactly the state an uninterrupted run had after this step.
                stop = self._stop(started)
                if stop:
                    return stop
                lr = schedule(self.step)
                t0 = time.perf_counter()
                self.losses.add(self.step + 1, self._step(lr), lr)
                self.step += 1
                # Losses are read (one device sync) at log and eval steps and at the
                # last one; the wait then counts in this step's time, so the totals hold.
                evaluating = self.evaluator.due(self.step)
                read = self.losses.read() if evaluating or self.steplog.due(self.step) else []
                self.metrics.record_step(
                    time.perf_counter() - t0, self.metrics.static["tokens_per_iter"]
                )
                reason = self.steplog.step_done(read, self.step)
                if reason:
                    return "diverged", reason
                if evaluating or self.checkpoints.latest_due(self.step):
                    self._evaluate_and_save(evaluating)
                    if self.early_stop.reason and self.step < total:
                        return "completed", self.early_stop.reason
                    if self.pruned:
                        return "completed", self.pruned
            return "completed", None
        except (Abandoned, KeyboardInterrupt) as err:
            # Mid-step: nothing consistent to save; the last checkpoint stays.
            name = str(err) or "SIGINT"
            self.stop_signal, self.abandoned = name, True
            return "stopped", (
                f"{name} received again while stopping: stopped at once "
                f"without a checkpoint; resumes from the last one"
            )
        finally:
            self.steplog.close()
            self.monitor.stop()

    def _step(self, lr: float) -> torch.Tensor | float:
        """One optimizer step; the first ones guarded (lib/train/fallback.py).
        Returns the loss unread (a device tensor), except in a guarded step, which
        reads it so that an asynchronous device error surfaces inside the guard."""
        if not self.first_steps.guards(self.step, self.training.step.compile_proven):
            return self.training.step(self.loaders["train"].next_batch, lr, self.step + 1)

        def attempt() -> float:
            return self.training.step(self.loaders["train"].next_batch, lr, self.step + 1).item()

        loss = retrying(attempt, lambda: self.loaders, self.training.optimizer, self._recover)
        if self.training.step.compile_ran():
            self.log("torch.compile: compiled model is running")
        return loss

    def _recover(self, err: Exception) -> None:
        """Take FirstSteps' decision after a failed first step: the batch plan, loaders
        and training stack it returns (compile off, or a smaller micro-batch), recorded."""
        step = self.training.step
        decision = self.first_steps.decide(err, step.compiled, step.compile_proven, self.batch_plan)
        plan, self.loaders, self.training = decision.apply(
            self.batch_plan, self.loaders, self.training
        )
        if plan != self.batch_plan:
            self.batch_plan = plan
            self.metrics.static.update(
                batch_record(
                    self.run, self.meta["vocab_size"], plan, describe_device(self.device), self.log
                )
            )
        self.metrics.record_event(step=self.step, **decision.record())
        self.log(decision.message())

    def _stop(self, started: float) -> tuple[str, str] | None:
        """(status, reason) when a signal (this rank's or another's) or TRAIN_MAX_TIME
        stops the run before the next step, else None; every rank stops at the same step."""
        limit = self.run.TRAIN_MAX_TIME
        late, signalled = (
            bool(limit) and time.monotonic() - started >= limit,
            STOP.signal is not None,
        )
        if not self.dist.any(late or signalled):
            return None
        diverged = self.steplog.check(self.losses.read(), self.step)  # then no resume checkpoint
        if diverged:
            return "diverged", diverged
        if not self.dist.any(signalled):  # every rank asks: all are here
            return "stopped", f"TRAIN_MAX_TIME={limit}s reached"
        self.stop_signal = STOP.signal or "SIGTERM"
        who = STOP.why() if signalled else "a stop signal to another rank"
        return "stopped", (
            f"{who}: stopped after step {self.step} of {self.run.GPT2_MAX_ITERS} "
            + self.checkpoints.stop_note(self.run_dir)
        )

    def _evaluate_and_save(self, evaluating: bool) -> None:
        best, t = False, self.training
        if evaluating:  # the step's forward: compiled or not
            val = self.evaluator(self.loaders["val"], t.model, t.step.forward, t.precision)
            best = self.metrics.record_val(self.step, val)
            self.early_stop.update(val)
            if self.trial.active:  # rank 0 asks the study; every rank stops with it
                reason = self.trial.report(self.step, val, self.metrics.per_char(val))
                if self.dist.any(reason is not None) and self.step < self.run.GPT2_MAX_ITERS:
                    self.pruned = reason or "pruned by the tuning study (rank 0 asked it)"
            self.log(
                f"eval step {self.step}: val loss {val:.4f} | val ppl {math.exp(val):.2f} | "
                f"{self.metrics.per_char(val):.4f} nats/char{' (best)' if best else ''}"
            )
            self.tracker.log_eval(self.step, self.metrics)
            self.samples(self.step, t.model, self.device)
        for name in self.checkpoints.due(self.step, best):
            self.save(name)
        self.metrics.write(self._summary("running"))
        self.backup.mirror()

    def save(self, name: str) -> None:
        rngs, plan = (
            self.dist.gather(rng_state()),
            self.batch_plan,
        )  # every rank's RNGs: exact resume
        parts = self.training.state_dict(self.dist)  # a collective under FSDP: every rank
        if not self.dist.is_main:
            return
        self.checkpoints.write(
            self.run_dir / name,
            {
                "step": self.step,
                "family": self.run.MODEL,
                "tokenizer": self.meta["tokenizer"],
                **parts,
                "rng_ranks": rngs,
                "rng": rngs[0],
                "batch": {"batch_size": plan.batch_size, "accumulation": plan.accumulation},
                "loaders": {k: loader.state_dict() for k, loader in self.loaders.items()},
                "metrics": self.metrics.state_dict(),
                "early_stop": self.early_stop.state_dict(),
            },
        )

    def _restore(self, state: dict[str, Any]) -> None:
        self.training.load_state_dict(state, self.dist)
        for k, loader in self.loaders.items():
            loader.load_state_dict(state["loaders"][k])
        self.metrics.load_state_dict(state["metrics"])
        self.early_stop.load_state_dict(state.get("early_stop"))
        restore_rng(state, self.dist.rank, self.dist.world_size)
        self.step = state["step"]
        self.metrics.record_event(step=self.step, event="resumed", overrides=self.run.overrides)
        if self.dist.is_main:  # the run's owner
            remove_run_temps(self.run_dir, RUN_FILES, self.backup, self.log)

    def _summary(self, status: str, reason: str | None = None) -> dict[str, Any]:
        t, static = self.training, self.metrics.static
        return self.metrics.summary(
            status,
            self.step,
            self.step * static["tokens_per_iter"],
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
                "stopped_early": status == "completed" and self.step < self.run.GPT2_MAX_ITERS,
                "stop_signal": self.stop_signal,
                **self.trial.record(),
            },
        )  # set: resumable (exit code EXIT_RESUMABLE)

    def _finish(self, status: str, reason: str | None) -> dict[str, Any]:
        if status != "diverged" and not self.abandoned and self.checkpoints.due_at_stop(self.step):
            self.save("ckpt_latest.pt")  # resume point; `make continue` picks it up
        summary = self._summary(status, reason)
        self.metrics.write(summary)
        inference_at_end(self.run, self.training.model, self.run_dir, self.log)  # INFERENCE_BENCH
        kv_circuit_at_end(self.run, self.training.model, self.loaders, self.run_dir, self.log)
        self.backup.mirror()
        if self.dist.is_main:
            remove_run_temps(self.run_dir, RUN_FILES, self.backup, self.log)
        self.tracker.close()
        self.log(
            f"{status}{': ' + reason if reason else ''} | step {self.step} | best val loss "
            f"{summary['best_val_loss'] or float('nan'):.4f} "
            f"({summary['best_val_loss_per_char'] or float('nan'):.4f} nats/char) | "
            f"{summary['tokens_per_sec']:,.0f} tok/s"
        )
        return summary
