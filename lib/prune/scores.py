"""Importance scores: a weight with a low score is pruned first.

magnitude and the movement increment are functions of the weights (and
gradient). The "bitter" variants of AdamWPrune score a weight from the
optimizer's own state, so pruning needs no per-weight buffer besides the
mask: m = exp_avg, v = exp_avg_sq, t = optimizer step, beta1 = Adam's beta1.
Every variant takes (w, m, v, *, step, beta1, eps) and returns a new tensor.
"""
from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor

V_FLOOR = 1e-8  # bitter7's additive floor inside the fourth root


def magnitude(w: Tensor) -> Tensor:
    """|w|."""
    return w.abs()


def movement_increment(w: Tensor, grad: Tensor) -> Tensor:
    """-(w * grad): one step's term of Sanh et al. 2020's S = sum_t -(w * dL/dw).

    A weight the gradient pushes away from zero gains score. Accumulating it
    costs one float buffer per prunable weight (the learning rate factor of
    the paper is dropped; it only rescales steps relative to each other).
    """
    return -(w * grad)


def bitter0(w: Tensor, m: Tensor, v: Tensor, *, step: float, beta1: float, eps: float) -> Tensor:
    """|w * m| * |w| / (sqrt(v) + eps): hybrid of momentum and update stability."""
    return (w * m).abs() * w.abs() / (v.sqrt() + eps)


def bitter1(w: Tensor, m: Tensor, v: Tensor, *, step: float, beta1: float, eps: float) -> Tensor:
    """|w|: plain magnitude."""
    return w.abs()


def bitter2(w: Tensor, m: Tensor, v: Tensor, *, step: float, beta1: float, eps: float) -> Tensor:
    """|w|: the same score as bitter1.

    In AdamWPrune bitter2 differs from bitter1 only in the training budget
    (about 21% more iterations, paid for by the sparse model); that is a
    choice of the run's iteration count, not of the score, so here it is a
    selectable name whose masks are identical to bitter1's.
    """
    return w.abs()


def bitter3(w: Tensor, m: Tensor, v: Tensor, *, step: float, beta1: float, eps: float) -> Tensor:
    """|w| * sqrt(|m|): magnitude weighted by recent gradient activity."""
    return w.abs() * m.abs().sqrt()


def bitter4(w: Tensor, m: Tensor, v: Tensor, *, step: float, beta1: float, eps: float) -> Tensor:
    """|w| * sqrt(|m|): bitter3's score; the pruner adds per-layer sparsities (layers.py)."""
    return bitter3(w, m, v, step=step, beta1=beta1, eps=eps)


def bitter5(w: Tensor, m: Tensor, v: Tensor, *, step: float, beta1: float, eps: float) -> Tensor:
    """-sign(w) * m / (sqrt(v) + eps) + 0.1 |w|: low when Adam moves w toward zero.

    Adam's update is -lr * m / (sqrt(v) + eps), so sign(w) * m > 0 means w is
    being pushed toward zero; the minus sign makes those weights score low
    and be pruned first (the Adam-normalised analogue of movement pruning's
    -(w * grad)). The 0.1 |w| term breaks ties among weights at rest.
    """
    return -torch.sign(w) * m / (v.sqrt() + eps) + 0.1 * w.abs()


def bitter6(w: Tensor, m: Tensor, v: Tensor, *, step: float, beta1: float, eps: float) -> Tensor:
    """|w| * sqrt(|m|) * sqrt(m^2 / (v + eps)): bitter3 weighted by gradient coherence."""
    return bitter3(w, m, v, step=step, beta1=beta1, eps=eps) * (m * m / (v + eps)).sqrt()


def bitter7(w: Tensor, m: Tensor, v: Tensor, *, step: float, beta1: float, eps: float) -> Tensor:
    """|w| * (|v| + 1e-8)^0.25: magnitude weighted by the long-memory second moment."""
    return w.abs() * (v.abs() + V_FLOOR).pow(0.25)


def bitter8(w: Tensor, m: Tensor, v: Tensor, *, step: float, beta1: float, eps: float) -> Tensor:
    """|w| * sqrt(|m / (1 - beta1^t)|): bitter3 with Adam's bias-corrected momentum."""
    correction = 1.0 - beta1 ** max(float(step), 1.0)
    return w.abs() * (m / correction).abs().sqrt()


def bitter9(w: Tensor, m: Tensor, v: Tensor, *, step: float, beta1: float, eps: float) -> Tensor:
    """0.5 * w^2 * v: Optimal Brain Damage saliency with Adam's v as the Fisher diagonal.

    OBD (LeCun et al. 1990) estimates the loss increase from zeroing w as
    0.5 * H_ww * w^2; the empirical Fisher E[g^2] approximates H_ww and v is
    an EMA of g^2. Unlike bitter7 (|w| * v^(1/4)) this ranks like |w| * sqrt(v),
    the full second-order estimate. v's bias correction is one factor shared
    by every weight, so it cannot change the ranking and is left out.
    """
    return 0.5 * w * w * v


ScoreFn = Callable[..., Tensor]

VARIANTS: dict[str, tuple[ScoreFn, str]] = {
    "bitter0": (bitter0, "|w*m| * |w| / (sqrt(v)+eps): hybrid momentum-stability"),
    "bitter1": (bitter1, "|w|: pure magnitude"),
    "bitter2": (bitter2, "|w|: magnitude, meant for a longer training budget than bitter1"),
    "bitter3": (bitter3, "|w| * sqrt(|m|): gradient-magnitude"),
    "bitter4": (bitter4, "bitter3 with per-layer sparsity 1.3x..0.7x by layer mean-score rank"),
    "bitter5": (bitter5, "-sign(w) * m / (sqrt(v)+eps) + 0.1|w|: prune what Adam moves to zero"),
    "bitter6": (bitter6, "bitter3 * sqrt(m^2 / (v+eps)): coherence-weighted gradient-magnitude"),
    "bitter7": (bitter7, "|w| * (|v| + 1e-8)^0.25: second-moment weighted magnitude"),
    "bitter8": (bitter8, "|w| * sqrt(|m / (1 - beta1^t)|): bias-corrected gradient-magnitude"),
    "bitter9": (bitter9, "0.5 * w^2 * v: Optimal Brain Damage with Adam's v as Fisher diagonal"),
}
