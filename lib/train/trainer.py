"""The training loop every model family uses, nanoGPT's loop over parts that
answer for themselves (lib/train/parts.py assembles them): each step runs
forward and backward over its micro-batches, then the optimizer
(lib/train/step.py); the evaluator and the checkpointer say when they are due;
each part reports its log fields and record. Stops at MAX_ITERS, at
TRAIN_MAX_TIME, on a stop signal (SIGTERM, SIGINT, SIGUSR1; lib/run/signals.py),
both at a step boundary with a checkpoint (none with SAVE_CHECKPOINT off), or on
divergence (the last good checkpoint stays).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from lib.distributed.runtime import SINGLE, DistEnv
from lib.hardware.devices import describe_device
from lib.observe.monitor import CPU_FILE, GPU_FILE
from lib.run import record
from lib.run.backup import remove_run_temps
from lib.run.checkpoint import restore_rng, rng_state
from lib.run.metrics import KernelShare
from lib.run.signals import STOP, Abandoned
from lib.train.fallback import Rewind
from lib.train.parts import Parts, build_parts
from lib.train.records import batch_record
from lib.train.schedule import lr_schedule
from lib.train.steplog import end_line

if TYPE_CHECKING:
    from lib.config.run_config import RunConfig

# What the run's own process writes atomically in its folder: the temporaries a killed
# write of these leaves are the run's to remove (config.txt, eval.json have other writers).
RUN_FILES = ("ckpt_latest.pt", "ckpt_best.pt", "metrics.json", GPU_FILE, CPU_FILE)


class Trainer(Parts):
    """The loop over the parts build_parts assembles (module docstring)."""

    def __init__(
        self,
        run: RunConfig,
        run_dir: Path,
        log: Callable[[str], None],
        resume: dict[str, Any] | None = None,
        dist: DistEnv = SINGLE,
    ):
        fields = lambda: self.training.log_fields()  # noqa: E731 (the stack in use)
        super().__init__(**vars(build_parts(run, Path(run_dir), log, resume, dist, fields)))
        self.step = 0
        self.pruned: str | None = None  # why the tuning study pruned this trial
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
        total, schedule = self.run.GPT2_MAX_ITERS, lr_schedule(self.run.train)
        started = time.monotonic()
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
                t0, kernel = time.perf_counter(), KernelShare.now()
                self.losses.add(self.step + 1, self._guarded_step(lr), lr)
                self.step += 1
                # Losses are read (one device sync) at log and eval steps and at the
                # last one; the wait then counts in this step's time, so the totals hold.
                evaluating = self.evaluator.due(self.step)
                read = self.losses.read() if evaluating or self.steplog.due(self.step) else []
                self.metrics.record_step(
                    time.perf_counter() - t0,
                    self.metrics.static["tokens_per_iter"],
                    KernelShare.since(kernel),
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

    def _optimizer_step(self, lr: float) -> torch.Tensor:
        """Forward and backward over the step's micro-batches, then the optimizer
        (clip, prune, step: lib/train/step.py); the mean loss, unread."""
        return self.training.step(self.loaders["train"].next_batch, lr, self.step + 1)

    def _guarded_step(self, lr: float) -> torch.Tensor | float:
        """The optimizer step; the first ones guarded (lib/train/fallback.py): a failed
        one is retried after FirstSteps' fallback, and its loss is read inside the
        guard, so that an asynchronous device error surfaces there."""
        if not self.first_steps.guards(self.step, self.training.step.compile.proven):
            return self._optimizer_step(lr)
        rewind = Rewind(self.loaders)
        while True:
            try:
                loss = self._optimizer_step(lr).item()
                break
            except Exception as err:  # any backend failure, by design
                self._recover(err)  # raises to give up
            rewind(self.loaders, self.training.optimizer)  # outside except: tensors freed
        if self.training.step.compile.ran():
            self.log("torch.compile: compiled model is running")
        return loss

    def _recover(self, err: Exception) -> None:
        """Take FirstSteps' decision after a failed first step: the batch plan, loaders
        and training stack it returns (compile off, or a smaller micro-batch), recorded."""
        state = self.training.step.compile
        decision = self.first_steps.decide(err, state.compiled, state.proven, self.batch_plan)
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
            val = self.evaluator(self.loaders["val"], t.model, t.step.compile.forward, t.precision)
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
            for analysis in self.analyses:
                analysis.after_eval(self.step, t.model, self.device)
        for name in self.checkpoints.due(self.step, best):
            self.save(name)
        self.metrics.write(self._summary("running"))
        self.backup.mirror()

    def save(self, name: str) -> None:
        rngs = self.dist.gather(rng_state())  # every rank's RNGs: exact resume
        parts = self.training.state_dict(self.dist)  # a collective under FSDP: every rank
        if self.dist.is_main:
            self.checkpoints.write(self.run_dir / name, self.state_dict(self.step, rngs, parts))

    def _restore(self, state: dict[str, Any]) -> None:
        self.load_state_dict(state)
        restore_rng(state, self.dist.rank, self.dist.world_size)
        self.step = state["step"]
        self.metrics.record_event(step=self.step, event="resumed", overrides=self.run.overrides)
        if self.dist.is_main:  # the run's owner
            remove_run_temps(self.run_dir, RUN_FILES, self.backup, self.log)

    def _summary(self, status: str, reason: str | None = None) -> dict[str, Any]:
        return self.summary(
            status,
            self.step,
            reason,
            {
                "stopped_early": status == "completed" and self.step < self.run.GPT2_MAX_ITERS,
                "stop_signal": self.stop_signal,
            },
        )  # set: resumable (exit code EXIT_RESUMABLE)

    def _finish(self, status: str, reason: str | None) -> dict[str, Any]:
        if status != "diverged" and not self.abandoned and self.checkpoints.due_at_stop(self.step):
            self.save("ckpt_latest.pt")  # resume point; `make continue` picks it up
        summary = self._summary(status, reason)
        self.metrics.write(summary)
        for analysis in self.analyses:  # INFERENCE_BENCH, MECHINT_KV
            analysis.at_end(self.training.model, self.loaders)
        self.backup.mirror()
        if self.dist.is_main:
            remove_run_temps(self.run_dir, RUN_FILES, self.backup, self.log)
        self.tracker.close()
        self.log(end_line(summary, self.step))
        return summary
