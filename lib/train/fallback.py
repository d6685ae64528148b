"""The first optimizer steps of a run, guarded: what to do when one fails.

torch.compile is lazy, so it compiles (and may fail) on the first step, and
a configuration too large for the device fails within the first steps. For
GUARDED_STEPS steps after every start (and until a compiled step has run),
the trainer catches a failed step, asks FirstSteps.decide for a Decision,
applies it (lib/train/trainer.py), puts the samplers back where the step began
(Rewind) and retries. This module only decides; it changes no trainer state.

* out of memory (TRAIN_OOM_FALLBACK, single process): first CompileOff, then
  SmallerBatch: the micro-batch halved (its largest divisor at most half as
  large) and the accumulation multiplied to match, so the effective batch
  never changes, down to TRAIN_OOM_MIN_BATCH; below that the run fails with
  the error. Each rung is an "oom_fallback" event in metrics.json and the
  batch that ran is in its micro_batch_size and gradient_accumulation fields.
* any other failure of the first compiled step: CompileOff, continuing in
  eager mode ("compile_failed" event) unless COMPILE_STRICT is set.

CompileOff, like the compile state it turns off, is lib/speed/compile.py's.

Giving up is raising: decide() re-raises the error, or raises one that says
what to change. Under several processes an out-of-memory error stops the
run: the ranks would have to agree on a smaller batch mid-step (lower
BATCH_SIZE instead).
"""

from __future__ import annotations

import gc
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import torch

from lib.data.sources import DataError
from lib.estimate.fit import BatchPlan
from lib.speed.compile import CompileOff

if TYPE_CHECKING:
    from lib.config.symbols import Speed, Train
    from lib.train.build import Training

GUARDED_STEPS = 3
_OOM_TEXT = ("out of memory", "can't allocate memory", "failed to allocate")


def is_out_of_memory(err: BaseException | None) -> bool:
    """True for torch's OutOfMemoryError, or an error it caused (compilers wrap it)."""
    seen = 0
    while err is not None and seen < 8:
        if isinstance(err, torch.OutOfMemoryError):
            return True
        if any(text in str(err).lower() for text in _OOM_TEXT):
            return True
        err, seen = err.__cause__ or err.__context__, seen + 1
    return False


def smaller_batch(batch: int, floor: int) -> int | None:
    """The largest divisor of batch that is at most half of it and >= floor."""
    for size in range(batch // 2, max(floor, 1) - 1, -1):
        if batch % size == 0:
            return size
    return None


@dataclass(frozen=True)
class SmallerBatch:
    """Retry at micro-batch batch_size x accumulation (was from_batch); the
    effective batch is unchanged."""

    from_batch: int
    batch_size: int
    accumulation: int
    error: str

    def record(self) -> dict[str, Any]:
        return {
            "event": "oom_fallback",
            "action": "smaller_batch",
            "batch_size": self.batch_size,
            "accumulation": self.accumulation,
            "error": self.error,
        }

    def apply(
        self, plan: BatchPlan, loaders: dict[str, Any], training: Training
    ) -> tuple[BatchPlan, dict[str, Any], Training]:
        """The batch plan, loaders and training stack that carry this out: new
        objects (the model, optimizer and sampler positions carried over)."""
        plan = plan.rebatched(
            self.batch_size, self.accumulation, "TRAIN_OOM_FALLBACK: out of memory"
        )
        loaders = {k: loader.rebatched(self.batch_size) for k, loader in loaders.items()}
        return plan, loaders, replace(training, step=training.step.rebatched(self.accumulation))

    def message(self) -> str:
        return (
            f"out of memory at micro-batch {self.from_batch}: retrying with micro-batch "
            f"{self.batch_size} x accumulation {self.accumulation} (effective batch "
            f"unchanged; TRAIN_OOM_FALLBACK)"
        )


Decision = CompileOff | SmallerBatch


class FirstSteps:
    """Which steps are guarded, and the decision when one fails (module docstring)."""

    def __init__(self, t: Train, s: Speed, distributed: bool):
        self.oom_fallback = t.TRAIN_OOM_FALLBACK and not distributed
        self.min_batch = t.TRAIN_OOM_MIN_BATCH
        self.strict = s.COMPILE_STRICT
        self.until: int | None = None  # guarded up to this step (set on first use: after a resume)

    def guards(self, done: int, compile_proven: bool) -> bool:
        """Whether the step after `done` finished steps is guarded."""
        if self.until is None:
            self.until = done + GUARDED_STEPS
        return done < self.until or not compile_proven

    def decide(
        self, err: Exception, compiled: bool, compile_proven: bool, plan: BatchPlan
    ) -> Decision:
        """What to do after `err` in a guarded step; raises when nothing is left."""
        if isinstance(err, DataError):  # the batch itself is bad: no fallback helps
            raise err
        if is_out_of_memory(err):
            if not self.oom_fallback:
                raise err
            if compiled:
                return CompileOff("oom_fallback", _short(err))
            return self._smaller(err, plan)
        if compile_proven:
            raise err
        if self.strict:
            raise RuntimeError(
                f"torch.compile failed and CONFIG_COMPILE_STRICT is set: {_short(err)}"
            ) from err
        return CompileOff("compile_failed", _short(err))

    def _smaller(self, err: Exception, plan: BatchPlan) -> SmallerBatch:
        batch = plan.batch_size
        smaller = smaller_batch(batch, self.min_batch)
        if smaller is None:
            raise RuntimeError(
                f"out of memory at micro-batch {batch}, and the fallback ladder "
                f"may not go lower (TRAIN_OOM_MIN_BATCH={self.min_batch}); lower "
                f"the model size or block size, or set "
                f"TRAIN_GRADIENT_CHECKPOINTING"
            ) from err
        return SmallerBatch(batch, smaller, plan.accumulation * batch // smaller, _short(err))


class Rewind:
    """Where a guarded step began: before a retry, the samplers go back there and
    the failed step's gradients and cached device memory are freed."""

    def __init__(self, loaders: dict[str, Any]):
        self.saved = {k: loader.state_dict() for k, loader in loaders.items()}

    def __call__(self, loaders: dict[str, Any], optimizer: Any) -> None:
        for k, loader in loaders.items():
            loader.load_state_dict(self.saved[k])
        optimizer.zero_grad(set_to_none=True)
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()


def _short(err: BaseException) -> str:
    return f"{type(err).__name__}: {err}".strip()[:2000]
