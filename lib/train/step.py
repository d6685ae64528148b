"""One optimizer step: accumulate micro-batches (forward_backward), then unscale,
mask, clip, step (update).

Shared by the trainer and by `make bench`, so the benchmark times exactly
the step that training runs.

The step returns its mean loss as a 0-dim tensor on the model's device and
never reads it: reading it (.item()) waits for the device, which a CUDA step
should not do every step (the trainer reads the losses once per log
interval). The one host sync left is the GradScaler's own (fp16, and the
pruner's `_will_skip` with it).

Each phase runs inside a torch.profiler range named in RANGES, so a
profile of a few steps says where the time goes (`make bench` prints that
breakdown); outside a profiler the ranges cost one flag test each.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

import torch
from torch.autograd.profiler import record_function

from lib.speed.compile import CompileState
from lib.speed.precision import Precision

Batch = tuple[torch.Tensor, torch.Tensor]

# Profiler range names, one per phase of a step (lib/bench/step.py aggregates them).
RANGES = {
    "data": "step.data",
    "forward": "step.forward",
    "backward": "step.backward",
    "optimizer": "step.optimizer",
    "pruning": "step.pruning",
}
_NULL = contextlib.nullcontext()


@contextlib.contextmanager
def _range(name: str, synchronize: Callable[[], None] | None) -> Iterator[None]:
    with record_function(name):
        yield
        if synchronize is not None:  # the phase's device work ends inside its range
            synchronize()


class TrainStep:
    """`pruner` (optional) sees the finished, unscaled gradients before they
    are clipped (movement scores, pruned gradients zeroed; told when the
    GradScaler will skip the step) and masks weights and moments after the
    optimizer step. An optimizer with a `before_clip()` method (knlp's
    AdamWSPAM rule, lib/optim/knlp_spam.py) has it called once per step on
    those same gradients, after the pruner's masking and before the clip.
    `eager` is the forward to run uncompiled (the model, or
    its DDP/FSDP wrapper); `sync(last)` wraps each micro-batch (DistEnv.sync).

    `compile` is the torch.compile state (lib/speed/compile.py): its
    `forward` is what each micro-batch runs, `eager` or its torch.compile."""

    def __init__(
        self,
        model: torch.nn.Module,
        optimizer: torch.optim.Optimizer,
        precision: Precision,
        accumulation: int,
        grad_clip: float,
        pruner: Any = None,
        eager: Callable | None = None,
        sync: Callable[[bool], Any] | None = None,
    ):
        self.model = model
        self.compile = CompileState(model if eager is None else eager)
        self.optimizer = optimizer
        self.precision = precision
        self.scaler = precision.grad_scaler()
        self.accumulation = accumulation
        self.grad_clip = grad_clip
        self.pruner = pruner
        self.before_clip: Callable[[], None] | None = getattr(optimizer, "before_clip", None)
        # sync(last) wraps each micro-batch: under DDP it skips the gradient
        # all-reduce (no_sync) on all but the last one of an accumulation.
        self.sync: Callable[[bool], Any] = sync or (lambda last: contextlib.nullcontext())
        # Called at the end of each phase range while profiling (make bench on CUDA).
        self.synchronize: Callable[[], None] | None = None

    def phase(self, name: str) -> AbstractContextManager[Any]:
        """The profiler range of phase `name`, or nothing when no profiler runs."""
        # torch's own flag (private; were it gone, every range would be recorded: ~4 us each)
        if getattr(torch.autograd.profiler, "_is_profiler_enabled", True):
            return _range(RANGES[name], self.synchronize)
        return _NULL

    def __call__(self, next_batch: Callable[[], Batch], lr: float, step: int = 0) -> torch.Tensor:
        """Run optimizer step number `step` (1-based) at learning rate lr; returns
        the mean loss, a detached 0-dim tensor on the model's device (unread). The
        one micro-batch loop: the trainer and the benchmarks call it."""
        self.set_lr(lr)
        total = self.forward_backward(next_batch, 0)
        for i in range(1, self.accumulation):
            total = total + self.forward_backward(next_batch, i)
        self.update(step)
        return total

    def set_lr(self, lr: float) -> None:
        for group in self.optimizer.param_groups:
            group["lr"] = lr * group.get("lr_ratio", 1.0)  # Muon's groups: own LR scale

    def forward_backward(self, next_batch: Callable[[], Batch], i: int) -> torch.Tensor:
        """Micro-batch i of the step: forward, then backward into the gradients;
        its share of the step's mean loss, detached and unread."""
        with self.phase("data"):
            x, y = next_batch()
        with self.sync(i == self.accumulation - 1):
            with self.phase("forward"), self.precision.autocast():
                # Not binding the logits frees them before backward (B x T x vocab).
                loss = self.compile.forward(x, y)[1]
            # Dividing makes the summed gradient equal one batch accumulation x larger.
            if self.accumulation > 1:
                loss = loss / self.accumulation
            with self.phase("backward"):
                self.scaler.scale(loss).backward()
        return loss.detach()

    def update(self, step: int) -> None:
        """Optimizer step number `step` on the accumulated gradients: unscale, the
        pruner's masks, clip, step, the pruner's update, zero the gradients."""
        if self.grad_clip > 0 or self.pruner is not None or self.before_clip is not None:
            with self.phase("optimizer"):
                self.scaler.unscale_(
                    self.optimizer
                )  # clip and score true gradients, not scaled ones
        if self.pruner is not None:
            # Masked before clipping, as the reference trainer does: the norm is
            # that of the gradients the optimizer will apply (pruned entries 0).
            with self.phase("pruning"):
                self.pruner.before_step(step, skipped=self._will_skip())
        with self.phase("optimizer"):
            if self.before_clip is not None:
                self.before_clip()
            if self.grad_clip > 0:
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.grad_clip)
            self.scaler.step(self.optimizer)
            self.scaler.update()
        if self.pruner is not None:
            with self.phase("pruning"):
                self.pruner.after_step(step)
        with self.phase("optimizer"):
            self.optimizer.zero_grad(set_to_none=True)

    def rebatched(self, accumulation: int) -> TrainStep:
        """This step running `accumulation` micro-batches per optimizer step (its
        model, optimizer, scaler and compile state carried over)."""
        step = copy.copy(self)
        step.accumulation = accumulation
        step.compile = copy.copy(self.compile)
        return step

    def _will_skip(self) -> bool:
        """Whether scaler.step will skip this step: unscale_ found inf/NaN gradients.

        Read from the scaler's own record (a private but long-stable
        method), so the decision is exactly the one scaler.step makes; it
        syncs the device once, as scaler.step itself does.
        """
        if not self.scaler.is_enabled():
            return False
        found = self.scaler._found_inf_per_device(self.optimizer)
        return any(bool(v.item()) for v in found.values())
