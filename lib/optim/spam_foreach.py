"""AdamWSPAM's multi-tensor step: the rule of spam.py on lists of tensors.

A parameter group's parameters that have gradients are bucketed by device,
dtype and their state's step count (one count unless some parameter missed
steps for want of a gradient), so the bias corrections are scalars and
every operation is one torch._foreach_* call per bucket: about twenty
multi-tensor kernels per step, where the per-parameter loop launches
about a dozen per parameter.

Spike clipping without a per-tensor where(), with c = sqrt(theta * v_prev):

    g'  = clamp(g, -c, c)         # == where(|g| > c, copysign(c, g), g)
    clipped += sum |sign(g - g')| # entries changed; summed on the device, no host sync

With spare_unseen, entries whose v_prev is 0 are left alone:
lim = c + BIG * (1 - sign(c)) replaces c (BIG, the dtype's max, where
v_prev == 0: no limit).  These are the per-parameter path's values exactly:
the same c, the same comparison, and clamp returns g itself or +-c.  One
difference, in a state that is already ruined: with spare_unseen an
infinite gradient entry whose v_prev is 0 is passed on as +-BIG here and as
+-inf by the per-parameter path.  The update then runs the per-parameter
path's operations in the same order, so on CPU (where a multi-tensor op
loops over the per-tensor kernels) both paths agree to the bit.  p.grad is
never written.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor

from lib.optim.spike import EXP_AVG_FACTOR, EXP_AVG_SQ_FACTOR

# The clip count is a float sum of 0/1 entries, exact up to 2**24 terms; tensors
# are summed in pieces of at most this many entries, the pieces as integers.
COUNT_PIECE = 1 << 24


def step_group(
    group: dict[str, Any],
    params: list[Tensor],
    state: dict[Tensor, Any],
    scale: float,
    clip: bool,
    spare_unseen: bool,
    counts: dict[torch.device, Tensor],
    damp: bool = False,
) -> None:
    """One SPAM step of `params` (all with gradients and state) of `group`.

    scale is the warmup factor of the update, clip whether this call clips,
    damp whether the moments are damped after clipping (spike reset); clip
    counts are added to counts[device] (int64 tensors, as the per-parameter
    path keeps them).
    """
    buckets: dict[tuple[torch.device, torch.dtype, float], list[Tensor]] = {}
    for p in params:
        key = (p.device, p.dtype, float(state[p]["step"]))  # a CPU tensor: no sync
        buckets.setdefault(key, []).append(p)
    for (device, _, done), ps in buckets.items():
        grads = [p.grad for p in ps]
        exp_avg_sqs = [state[p]["exp_avg_sq"] for p in ps]
        if clip:
            grads, count = clip_spikes(grads, exp_avg_sqs, group["theta"], spare_unseen)
            acc = counts.get(device)
            counts[device] = count if acc is None else acc.add_(count)
        exp_avgs = [state[p]["exp_avg"] for p in ps]
        if damp:
            scale_(exp_avgs, EXP_AVG_FACTOR)
            scale_(exp_avg_sqs, EXP_AVG_SQ_FACTOR)
        maxes = [state[p]["max_exp_avg_sq"] for p in ps] if group["amsgrad"] else None
        update(
            ps,
            grads,
            exp_avgs,
            exp_avg_sqs,
            [state[p]["step"] for p in ps],
            group,
            done + 1,
            scale,
            maxes,
        )


def clip_spikes(
    grads: list[Tensor], exp_avg_sqs: list[Tensor], theta: float, spare_unseen: bool
) -> tuple[list[Tensor], Tensor]:
    """(new clipped gradients, int64 count of clipped entries on their device)."""
    lim = torch._foreach_mul(exp_avg_sqs, theta)
    torch._foreach_sqrt_(lim)
    if spare_unseen:
        unseen = torch._foreach_sign(lim)
        torch._foreach_sub_(unseen, 1.0)  # -1 where v_prev == 0, else 0
        torch._foreach_add_(lim, unseen, alpha=-torch.finfo(grads[0].dtype).max)
        del unseen
    low = torch._foreach_neg(lim)
    torch._foreach_minimum_(lim, grads)  # lim becomes g'
    torch._foreach_maximum_(lim, low)
    del low
    changed = torch._foreach_sub(grads, lim)
    torch._foreach_sign_(changed)
    return lim, count_nonzero(changed)


def count_nonzero(signs: list[Tensor]) -> Tensor:
    """Entries of `signs` (values -1, 0, 1; one device) that are not 0, as an int64 tensor."""
    pieces = [
        piece
        for t in signs
        for piece in (t.reshape(-1).split(COUNT_PIECE) if t.numel() > COUNT_PIECE else (t,))
    ]
    dtype = torch.float32 if signs[0].element_size() < 4 else None  # sum half types in float
    norms = torch._foreach_norm(pieces, 1, dtype=dtype)
    return torch.stack(norms).to(torch.int64).sum()


def update(
    params: list[Tensor],
    grads: list[Tensor],
    exp_avgs: list[Tensor],
    exp_avg_sqs: list[Tensor],
    steps: list[Tensor],
    group: dict[str, Any],
    step: float,
    scale: float,
    maxes: list[Tensor] | None = None,
) -> None:
    """Moments, the update with eps on the root of the raw v, then weight decay.

    step is the bias-correction count after this step (all `steps` equal step - 1);
    with maxes (AMSGrad) they become max(maxes, v) and divide instead of v.
    """
    beta1, beta2 = group["betas"]
    lr, eps, wd = group["lr"], group["eps"], group["weight_decay"]
    torch._foreach_add_(steps, 1.0)
    scale_(exp_avgs, beta1)
    torch._foreach_add_(exp_avgs, grads, alpha=1 - beta1)
    scale_(exp_avg_sqs, beta2)
    torch._foreach_addcmul_(exp_avg_sqs, grads, grads, value=1 - beta2)
    if maxes is not None:
        torch._foreach_maximum_(maxes, exp_avg_sqs)
    denom = torch._foreach_sqrt(exp_avg_sqs if maxes is None else maxes)
    torch._foreach_add_(denom, eps)
    torch._foreach_addcdiv_(
        params, exp_avgs, denom, value=-step_size(lr, beta1, beta2, step) * scale
    )
    del denom
    if wd > 0:
        scale_(params, 1 - lr * wd)


def step_size(lr: float, beta1: float, beta2: float, t: float) -> float:
    """lr with the bias corrections of count t folded in, as the authors' code does."""
    return lr * (math.sqrt(1 - beta2**t) / (1 - beta1**t))


def scale_(tensors: list[Tensor], factor: float) -> None:
    """tensors *= factor, like Tensor.mul_(factor).

    On CPU, torch._foreach_mul_ with a Python number rounds the number to a
    16-bit dtype first (0.999 becomes 1.0 in bfloat16); a 0-dim float32
    tensor keeps it exact there.  Elsewhere the number is passed, so that
    CUDA takes its multi-tensor kernel.
    """
    if tensors[0].device.type == "cpu" and tensors[0].element_size() < 4:
        torch._foreach_mul_(tensors, torch.tensor(factor))
    else:
        torch._foreach_mul_(tensors, factor)
