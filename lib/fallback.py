"""The first optimizer steps of a run, guarded: compile failures and running
out of memory are recovered from, each recovery logged and recorded.

torch.compile is lazy, so it compiles (and may fail) on the first step, and
a configuration too large for the device fails within the first steps. For
GUARDED_STEPS steps after every start, FirstSteps catches the error, puts
the samplers back where the step began and retries:

* out of memory (TRAIN_OOM_FALLBACK, single process): first without
  torch.compile, then with the micro-batch halved (its largest divisor at
  most half as large) and the accumulation multiplied to match, so the
  effective batch never changes, down to TRAIN_OOM_MIN_BATCH; below that
  the run fails with the error. Each rung is an "oom_fallback" event in
  metrics.json and the batch that ran is in its micro_batch_size and
  gradient_accumulation fields.
* any other failure of the first compiled step: continue in eager mode
  ("compile_failed" event) unless COMPILE_STRICT is set.

Under several processes an out-of-memory error stops the run: the ranks
would have to agree on a smaller batch mid-step (lower BATCH_SIZE instead).
"""
from __future__ import annotations

import gc
from typing import Any

import torch

from lib.estimate.fit import with_batch
from lib.hardware import describe_device

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


class FirstSteps:
    """Calls the trainer's train_step; guards the first steps (module docstring)."""

    def __init__(self, trainer: Any):
        self.trainer = trainer
        self.until: int | None = None  # guarded up to this step (set on first use)

    def __call__(self, lr: float) -> float:
        t = self.trainer
        step = t.step + 1
        if self.until is None:
            self.until = t.step + GUARDED_STEPS
        if t.step >= self.until and t._compile_proven:
            return t.train_step(t.loaders["train"].next_batch, lr, step)
        saved = {k: loader.state_dict() for k, loader in t.loaders.items()}
        while True:
            try:
                loss = t.train_step(t.loaders["train"].next_batch, lr, step)
                if not t._compile_proven:
                    t._compile_proven = True
                    t.log("torch.compile: compiled model is running")
                return loss
            except Exception as err:  # any backend failure, by design
                self._recover(err)
            # Retry outside the except block, so the failed step's tensors are freed.
            for k, loader in t.loaders.items():
                loader.load_state_dict(saved[k])
            t.optimizer.zero_grad(set_to_none=True)
            gc.collect()
            if torch.cuda.is_available():
                torch.cuda.empty_cache()

    def _recover(self, err: Exception) -> None:
        t = self.trainer
        if is_out_of_memory(err):
            if not t.run.get("TRAIN_OOM_FALLBACK") or t.dist.active:
                raise err
            if t.compiled:
                self._eager(err, "oom_fallback", action="eager")
            else:
                self._halve(err)
            return
        if t._compile_proven:
            raise err
        if t.run.get("COMPILE_STRICT"):
            raise RuntimeError(f"torch.compile failed and CONFIG_COMPILE_STRICT is set: "
                               f"{_short(err)}") from err
        self._eager(err, "compile_failed")
        banner = "!" * 72
        t.log(f"{banner}\nWARNING: torch.compile FAILED; continuing in EAGER mode "
              f"(set CONFIG_COMPILE_STRICT=y to stop instead)\n{t.compile_error}\n{banner}")

    def _eager(self, err: Exception, event: str, **extra: Any) -> None:
        t = self.trainer
        t.compile_error = _short(err)
        t.metrics.record_event(step=t.step, event=event, error=t.compile_error, **extra)
        if event == "oom_fallback":
            t.log(f"out of memory while compiling or in the first steps: retrying without "
                  f"torch.compile (TRAIN_OOM_FALLBACK)\n{t.compile_error}")
        t.train_step.forward, t.compiled, t._compile_proven = t.forward_module, False, True

    def _halve(self, err: Exception) -> None:
        t = self.trainer
        batch = t.loaders["train"].batch_size
        floor = t.run.get("TRAIN_OOM_MIN_BATCH", 1)
        smaller = smaller_batch(batch, floor)
        if smaller is None:
            raise RuntimeError(f"out of memory at micro-batch {batch}, and the fallback ladder "
                               f"may not go lower (TRAIN_OOM_MIN_BATCH={floor}); lower the "
                               f"model size or block size, or set TRAIN_GRADIENT_CHECKPOINTING"
                               ) from err
        accumulation = t.train_step.accumulation * batch // smaller
        for loader in t.loaders.values():
            loader.batch_size = smaller
        t.train_step.accumulation = accumulation
        t.run = with_batch(t.run, smaller, accumulation)  # the run as it now trains
        t.metrics.static.update(micro_batch_size=smaller, gradient_accumulation=accumulation,
                                memory_estimate_mb=t._memory_estimate(describe_device(t.device)))
        t.metrics.record_event(step=t.step, event="oom_fallback", action="smaller_batch",
                               batch_size=smaller, accumulation=accumulation, error=_short(err))
        t.log(f"out of memory at micro-batch {batch}: retrying with micro-batch {smaller} x "
              f"accumulation {accumulation} (effective batch unchanged; TRAIN_OOM_FALLBACK)")


def _short(err: BaseException) -> str:
    return f"{type(err).__name__}: {err}".strip()[:2000]
