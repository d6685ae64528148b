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
    """`pruner` (optional) sees the finished gradients before the optimizer
    step (movement scores) and masks weights and moments after it."""

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
        if self.grad_clip > 0:
            self.scaler.unscale_(self.optimizer)  # clip true gradients, not scaled ones
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.grad_clip)
        if self.pruner is not None:
            self.pruner.before_step(step)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        if self.pruner is not None:
            self.pruner.after_step(step)
        self.optimizer.zero_grad(set_to_none=True)
        return total.item()
