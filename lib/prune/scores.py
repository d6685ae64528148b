"""Importance scores: a weight with a low score is pruned first.

magnitude and the movement increment are functions of the weights (and
gradient). The state variants score a weight from the optimizer's own
moments, so pruning needs no per-weight buffer besides the mask:
m = exp_avg, v = exp_avg_sq (raw, not bias-corrected, as Adam stores them).

bitter0..bitter9 mean what AdamWPrune's code computes in mcgrof/knlp at
commit 041ec5f2760abc6f25b0291fa67bb154a76ba3fe (lib/optimizers.py,
update_adamprune_masks; its bitter code is unchanged since fc2f8b02 of
2025-11-15). That includes its constants: eps 1e-8 (not the optimizer's
eps), the 1e-8 inside sqrt(|m|), and bitter8's float16 arithmetic. Scores
of our own carry descriptive names (obd, toward_zero) and are marked ours.

What bitter2 and bitter4 add beyond their score lives elsewhere: bitter2
(= bitter1's score) stands for a longer training budget, and bitter4's
per-layer sparsities are in layers.py.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import torch
from torch import Tensor

EPS = 1e-8  # the reference's constant in every fp32 variant
FP16_EPS = 1e-5  # bitter8/bitter9's floor for |v| (1e-8 would vanish in float16)


def magnitude(w: Tensor) -> Tensor:
    """|w|."""
    return w.abs()


def weight_magnitude(w: Tensor, state: object) -> Tensor:
    """Magnitude pruning's score function (lib/prune/registry.py): |w|, whatever
    the optimizer keeps."""
    return magnitude(w)


def movement_increment(w: Tensor, grad: Tensor) -> Tensor:
    """-(w * grad): one step's term of Sanh et al. 2020's S = sum_t -(w * dL/dw).

    A weight the gradient pushes away from zero gains score. Accumulating it
    costs one float buffer per prunable weight (the learning rate factor of
    the paper is dropped; it only rescales steps relative to each other).
    """
    return -(w * grad)


def bitter0(w: Tensor, m: Tensor, v: Tensor) -> Tensor:
    """|w m| * |w| / (sqrt(v) + 1e-8): momentum times update stability."""
    return (w * m).abs() * (w.abs() / (v.sqrt() + EPS))


def bitter1(w: Tensor, m: Tensor, v: Tensor) -> Tensor:
    """|w|: plain magnitude."""
    return w.abs()


def bitter2(w: Tensor, m: Tensor, v: Tensor) -> Tensor:
    """|w|, as bitter1.

    In the reference bitter2 differs only in the training budget: its
    trainer raises max_iters from 10000 to 12100 (+21%). That is the run's
    GPT2_MAX_ITERS here, not part of the score.
    """
    return w.abs()


def bitter3(w: Tensor, m: Tensor, v: Tensor) -> Tensor:
    """|w| * sqrt(|m| + 1e-8): magnitude weighted by recent gradient activity."""
    return w.abs() * (m.abs() + EPS).sqrt()


def bitter4(w: Tensor, m: Tensor, v: Tensor) -> Tensor:
    """bitter3's score; the pruner gives each layer its own sparsity (layers.py)."""
    return bitter3(w, m, v)


def bitter5(w: Tensor, m: Tensor, v: Tensor) -> Tensor:
    """+sign(w) * m / (sqrt(v) + 1e-8) + 0.1 |w|, as the reference code computes it.

    Adam's update is -lr * m / (sqrt(v) + eps), so sign(w) * m > 0 means Adam
    is moving w toward zero. This sign scores those weights HIGH (kept); the
    reference's comments and docs describe the opposite sign, which is
    offered as toward_zero.
    """
    return (torch.sign(w) * m) / (v.sqrt() + EPS) + w.abs() * 0.1


def bitter6(w: Tensor, m: Tensor, v: Tensor) -> Tensor:
    """bitter3 * sqrt(m^2 / (v + 1e-8)): weighted by gradient coherence."""
    return bitter3(w, m, v) * (m * m / (v + EPS)).sqrt()


def bitter7(w: Tensor, m: Tensor, v: Tensor) -> Tensor:
    """|w| * (|v| + 1e-8)^0.25: magnitude weighted by the long-memory second moment."""
    return w.abs() * (v.abs() + EPS) ** 0.25


def bitter8(w: Tensor, m: Tensor, v: Tensor) -> Tensor:
    """bitter7's form in float16: |w16| * rsqrt(rsqrt(|v16| + 1e-5)), returned as float32.

    Every operation rounds to float16, so v below about 6e-8 reads as zero
    (floored by 1e-5) and scores carry 11 significant bits: many ties, and a
    ranking that differs from bitter7's for small v.
    """
    w16, v16 = w.to(torch.float16), v.to(torch.float16)
    root4 = torch.rsqrt(torch.rsqrt(v16.abs() + FP16_EPS))
    return (w16.abs() * root4).float()


def bitter9(w: Tensor, m: Tensor, v: Tensor) -> Tensor:
    """|w| * (|v| + 1e-5)^0.25 in float32: bitter8 as torch.compile runs it.

    The reference passes bitter8's code through torch.compile. Inductor
    computes float16 tensors in float32 and drops the float16 round trips
    (torch 2.13: its generated CPU kernel equals this bit for bit; Triton
    likewise upcasts), so only the 1e-5 floor remains of the float16 form.
    """
    return w.abs() * torch.rsqrt(torch.rsqrt(v.abs() + FP16_EPS))


def obd(w: Tensor, m: Tensor, v: Tensor) -> Tensor:
    """Ours: 0.5 * w^2 * v, Optimal Brain Damage with Adam's v as the Fisher diagonal.

    OBD (LeCun et al. 1990) estimates the loss increase from zeroing w as
    0.5 * H_ww * w^2; the empirical Fisher E[g^2] approximates H_ww and v is
    an EMA of g^2. It ranks like |w| * sqrt(v), where bitter7 uses v^(1/4).
    """
    return 0.5 * w * w * v


def toward_zero(w: Tensor, m: Tensor, v: Tensor) -> Tensor:
    """Ours: -sign(w) * m / (sqrt(v) + 1e-8) + 0.1 |w|, bitter5 with the sign its docs state.

    Weights Adam moves toward zero score low and are pruned first: the
    Adam-normalised analogue of movement pruning's -(w * grad).
    """
    return -(torch.sign(w) * m) / (v.sqrt() + EPS) + w.abs() * 0.1


ScoreFn = Callable[[Tensor, Tensor, Tensor], Tensor]


class Variant(NamedTuple):
    fn: ScoreFn
    needs: tuple[str, ...]  # moments the score reads; without them it falls back to |w|
    summary: str
    ours: bool  # True: our own score, not one of the reference's


M, V, MV = ("exp_avg",), ("exp_avg_sq",), ("exp_avg", "exp_avg_sq")

VARIANTS: dict[str, Variant] = {
    "bitter0": Variant(bitter0, MV, "|w m| |w| / (sqrt(v)+1e-8): momentum-stability", False),
    "bitter1": Variant(bitter1, (), "|w|: magnitude", False),
    "bitter2": Variant(bitter2, (), "|w|: magnitude (the reference trains it 21% longer)", False),
    "bitter3": Variant(bitter3, M, "|w| sqrt(|m|+1e-8): gradient-magnitude", False),
    "bitter4": Variant(bitter4, M, "bitter3 with per-layer sparsity 0.7x..1.3x by depth", False),
    "bitter5": Variant(
        bitter5, MV, "+sign(w) m / (sqrt(v)+1e-8) + 0.1|w| (the code's sign)", False
    ),
    "bitter6": Variant(bitter6, MV, "bitter3 * sqrt(m^2 / (v+1e-8)): coherence-weighted", False),
    "bitter7": Variant(bitter7, V, "|w| (|v|+1e-8)^0.25: second-moment weighted", False),
    "bitter8": Variant(bitter8, V, "bitter7 in float16 with 1e-5 floor", False),
    "bitter9": Variant(bitter9, V, "bitter8 compiled: fp32 |w| (|v|+1e-5)^0.25", False),
    "obd": Variant(obd, V, "ours: 0.5 w^2 v, Optimal Brain Damage with v as Fisher", True),
    "toward_zero": Variant(toward_zero, MV, "ours: -sign(w) m / (sqrt(v)+1e-8) + 0.1|w|", True),
}
