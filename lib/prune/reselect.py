"""knlp's movement pruning rule (mcgrof/knlp 041ec5f2, lib/movement_pruning.py, as its
GPT-2 trainer gpt2/trainers/vanilla.py runs it), for Pruner(movement_score="knlp").

Score: S = w (w - w0), w0 the weights when the pruner was built: positive for a
weight moving away from zero, negative for one moving toward it. Every update
re-chooses every mask from the current scores alone (no memory of the old masks):
with k = int(sparsity * entries), every entry scoring at or below the k-th
smallest score is pruned (ties at that value all go, so a few more than k can).
A pruned weight is 0 and scores 0, so it returns when k live weights score below
zero. Only the pruned weights' values are zeroed (after every step): their
gradients and optimizer moments are left to evolve, as knlp leaves them.
"""

from __future__ import annotations

import torch
from torch import Tensor


def start(w: Tensor) -> Tensor:
    """w0: a copy of the weights in float32 (float64 weights stay float64)."""
    return w.detach().to(torch.promote_types(w.dtype, torch.float32)).clone()


def displacement(w: Tensor, w0: Tensor) -> Tensor:
    """w (w - w0): knlp's movement score, in w0's precision."""
    w = w.to(w0.dtype)
    return w * (w - w0)


def reselect(scores: list[Tensor], sparsity: float) -> list[Tensor] | None:
    """Fresh bool masks (True = kept) for one group of score tensors, or None when
    int(sparsity * entries) is 0 (knlp then leaves the masks as they are)."""
    flat = torch.cat([s.reshape(-1) for s in scores])
    k = int(sparsity * flat.numel())
    if k <= 0:
        return None
    threshold = torch.kthvalue(flat, k).values
    return [s > threshold for s in scores]
