"""Validation: when the run evaluates, and the loss it measures.

Every GPT2_EVAL_INTERVAL steps and at the last step, TRAIN_EVAL_ITERS
validation batches; the loss is the cross-entropy alone (without a family's
auxiliary terms), so losses and perplexities compare across model families,
averaged over the ranks (so every rank takes the same early-stop decision).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F

if TYPE_CHECKING:
    from lib.config.symbols import Train
    from lib.speed.precision import Precision


class Evaluator:
    def __init__(self, t: Train, mean: Callable[[float], float]):
        self.interval, self.total = t.GPT2_EVAL_INTERVAL, t.GPT2_MAX_ITERS
        self.iters, self.mean = t.TRAIN_EVAL_ITERS, mean

    def due(self, step: int) -> bool:
        """Whether the run evaluates after `step`."""
        return step % self.interval == 0 or step == self.total

    @torch.no_grad()
    def __call__(
        self, loader: Any, model: torch.nn.Module, forward: Callable, precision: Precision
    ) -> float:
        """The mean validation loss of `forward` (the step's: compiled or not) on
        `loader`'s batches."""
        model.eval()
        losses = torch.zeros(self.iters)
        for i in range(self.iters):
            x, y = loader.next_batch()
            with precision.autocast():
                logits, _ = forward(x, y)
            losses[i] = F.cross_entropy(
                logits.float().flatten(0, 1), y.flatten(), ignore_index=-1
            ).item()
        model.train()
        return self.mean(losses.mean().item())
