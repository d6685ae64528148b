"""Training losses read in batches, and the divergence test applied to them.

TrainStep returns each step's loss as an unread device tensor: reading it
(`.item()`) waits for the device, which on a GPU stalls the host once per
step. The trainer queues them here and reads all pending ones in a single
sync at log and eval steps, at the last step and before a stop.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

# (optimizer step, loss, learning rate); the loss is a tensor until read.
Pending = tuple[int, "torch.Tensor | float", float]


class PendingLosses:
    """Losses of the steps not read yet. `mean` averages a read value over
    ranks (every rank reads at the same steps, so the collectives match)."""

    def __init__(self, mean: Callable[[float], float]) -> None:
        self.mean = mean
        self.queue: list[Pending] = []

    def add(self, step: int, loss: torch.Tensor | float, lr: float) -> None:
        self.queue.append((step, loss, lr))

    def read(self) -> list[tuple[int, float, float]]:
        """(step, loss averaged over ranks, lr) of every queued step, in order."""
        pending, self.queue = self.queue, []
        tensors = [loss for _, loss, _ in pending if isinstance(loss, torch.Tensor)]
        read = iter(torch.stack(tensors).tolist() if tensors else [])
        values = [next(read) if isinstance(loss, torch.Tensor) else loss for _, loss, _ in pending]
        return [(step, self.mean(value), lr) for (step, _, lr), value in zip(pending, values)]


def divergence(loss: float, best: float, step: int, now: int, factor: float) -> str | None:
    """Why the loss of step `step`, read at step `now`, ends the run, or None:
    not finite, or above `factor` (TRAIN_DIVERGENCE_FACTOR; 0 = off) x the best."""
    noticed = f" (read at step {now})" if step != now else ""
    if not math.isfinite(loss):
        return f"training loss is {loss} at step {step}{noticed}"
    if factor and math.isfinite(best) and loss > factor * best:
        return (
            f"training loss {loss:.4f} at step {step}{noticed} exceeds "
            f"TRAIN_DIVERGENCE_FACTOR={factor:g} x best {best:.4f}"
        )
    return None


def logged(step: int, interval: int, last: int) -> bool:
    """Whether step `step` is logged: every TRAIN_LOG_INTERVAL, the first, the last."""
    return step % interval == 0 or step == 1 or step == last
