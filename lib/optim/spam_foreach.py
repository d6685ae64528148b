"""AdamWSPAM's multi-tensor step: the rule of spam.py on lists of tensors.

A parameter group's parameters that have gradients are bucketed by device,
dtype and their state's step count (one count unless some parameter missed
steps for want of a gradient), so the bias corrections are scalars and
every operation is one torch._foreach_* call per bucket: about twenty
multi-tensor kernels per step, where the per-parameter reference launches
about a dozen per parameter.

Spike clipping without a per-tensor where(), with c = sqrt(theta * v_prev):

    lim = c + BIG * (1 - sign(c)) # BIG (the dtype's max) where v_prev == 0: no limit
    g'  = clamp(g, -lim, lim)     # == where(|g| > c > 0, copysign(c, g), g)
    clipped += sum |sign(g - g')| # entries changed; summed on the device, no host sync

These are the reference's values exactly: the same c, the same comparison,
and clamp returns g itself or +-c.  One difference, in a state that is
already ruined: an infinite gradient entry whose v_prev is 0 is passed on
as +-BIG here and as +-inf by the reference.  The AdamW update then runs
torch's own multi-tensor sequence, the reference's operations in the same
order, so on CPU (where a multi-tensor op loops over the per-tensor kernels)
both paths agree to the bit.  p.grad is never written.
"""
from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

# The clip count is a float sum of 0/1 entries, exact up to 2**24 terms; tensors
# are summed in pieces of at most this many entries, the pieces as integers.
COUNT_PIECE = 1 << 24


def step_group(group: dict[str, Any], params: list[Tensor], state: dict[Tensor, Any],
               scale: float, counts: dict[torch.device, Tensor]) -> None:
    """One SPAM step of `params` (all with gradients and state) of `group`.

    scale is the warmup multiplier of the Adam update; clip counts are added to
    counts[device] (int64 tensors, as the reference keeps them).
    """
    buckets: dict[tuple[torch.device, torch.dtype, float], list[Tensor]] = {}
    for p in params:
        key = (p.device, p.dtype, float(state[p]["step"]))  # a CPU tensor: no sync
        buckets.setdefault(key, []).append(p)
    for (device, _, done), ps in buckets.items():
        grads = [p.grad for p in ps]
        exp_avg_sqs = [state[p]["exp_avg_sq"] for p in ps]
        if group["clip"] and done > 0:  # v_prev is all zero otherwise
            grads, count = clip_spikes(grads, exp_avg_sqs, group["theta"])
            acc = counts.get(device)
            counts[device] = count if acc is None else acc.add_(count)
        adamw(ps, grads, [state[p]["exp_avg"] for p in ps], exp_avg_sqs,
              [state[p]["step"] for p in ps], group, done + 1, scale)


def clip_spikes(grads: list[Tensor], exp_avg_sqs: list[Tensor],
                theta: float) -> tuple[list[Tensor], Tensor]:
    """(new clipped gradients, int64 count of clipped entries on their device)."""
    big = torch.finfo(grads[0].dtype).max
    lim = torch._foreach_mul(exp_avg_sqs, theta)
    torch._foreach_sqrt_(lim)
    unseen = torch._foreach_sign(lim)
    torch._foreach_sub_(unseen, 1.0)  # -1 where v_prev == 0, else 0
    torch._foreach_add_(lim, unseen, alpha=-big)
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
    pieces = [piece for t in signs for piece in
              (t.reshape(-1).split(COUNT_PIECE) if t.numel() > COUNT_PIECE else (t,))]
    dtype = torch.float32 if signs[0].element_size() < 4 else None  # sum half types in float
    norms = torch._foreach_norm(pieces, 1, dtype=dtype)
    return torch.stack(norms).to(torch.int64).sum()


def adamw(params: list[Tensor], grads: list[Tensor], exp_avgs: list[Tensor],
          exp_avg_sqs: list[Tensor], steps: list[Tensor], group: dict[str, Any],
          step: float, scale: float) -> None:
    """torch.optim.AdamW's multi-tensor update, the warmup scale on the Adam term only.

    step is the bias-correction count after this step (all `steps` equal step - 1).
    """
    beta1, beta2 = group["betas"]
    lr, eps, wd = group["lr"], group["eps"], group["weight_decay"]
    torch._foreach_add_(steps, 1.0)
    if wd != 0:
        scale_(params, 1 - lr * wd)
    torch._foreach_lerp_(exp_avgs, grads, 1 - beta1)
    scale_(exp_avg_sqs, beta2)
    torch._foreach_addcmul_(exp_avg_sqs, grads, grads, value=1 - beta2)
    bias_correction1 = 1 - beta1 ** step
    bias_correction2_sqrt = (1 - beta2 ** step) ** 0.5
    denom = torch._foreach_sqrt(exp_avg_sqs)
    torch._foreach_div_(denom, bias_correction2_sqrt)
    torch._foreach_add_(denom, eps)
    torch._foreach_addcdiv_(params, exp_avgs, denom, value=-(lr / bias_correction1) * scale)


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
