"""One optimizer step: accumulate micro-batches, unscale, clip, step.

Shared by the trainer and by `make bench`, so the benchmark times exactly
the step that training runs.
"""
from __future__ import annotations

import contextlib
from typing import Any, Callable

import torch

from lib.precision import Precision

Batch = tuple[torch.Tensor, torch.Tensor]


class TrainStep:
    """`pruner` (optional) sees the finished, unscaled gradients before the
    optimizer step (movement scores; told when the GradScaler will skip the
    step) and masks weights and moments after it."""

    def __init__(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
                 precision: Precision, accumulation: int, grad_clip: float,
                 pruner: Any = None):
        self.model = model
        self.forward: Callable = model  # replaced by the compiled model when compiling
        self.optimizer = optimizer
        self.precision = precision
        self.scaler = precision.grad_scaler()
        self.accumulation = accumulation
        self.grad_clip = grad_clip
        self.pruner = pruner
        # sync(last) wraps each micro-batch: under DDP it skips the gradient
        # all-reduce (no_sync) on all but the last one of an accumulation.
        self.sync: Callable[[bool], Any] = lambda last: contextlib.nullcontext()

    def __call__(self, next_batch: Callable[[], Batch], lr: float, step: int = 0) -> float:
        """Run optimizer step number `step` (1-based) at learning rate lr; returns
        the mean loss."""
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        total = torch.zeros((), device=next(self.model.parameters()).device)
        for i in range(self.accumulation):
            x, y = next_batch()
            with self.sync(i == self.accumulation - 1):
                with self.precision.autocast():
                    # Not binding the logits frees them before backward (B x T x vocab).
                    loss = self.forward(x, y)[1]
                # Dividing makes the summed gradient equal one batch accumulation x larger.
                loss = loss / self.accumulation
                self.scaler.scale(loss).backward()
            total += loss.detach()
        if self.grad_clip > 0 or self.pruner is not None:
            self.scaler.unscale_(self.optimizer)  # clip and score true gradients, not scaled ones
        if self.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.grad_clip)
        if self.pruner is not None:
            self.pruner.before_step(step, skipped=self._will_skip())
        self.scaler.step(self.optimizer)
        self.scaler.update()
        if self.pruner is not None:
            self.pruner.after_step(step)
        self.optimizer.zero_grad(set_to_none=True)
        return total.item()

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
