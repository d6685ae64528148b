"""AdamWSPAM's step as one torch.compile'd function (OPTIMIZER_IMPL=fused).

The rule of spam.py, written as the per-parameter path's own operations in
the same order, over a bucket of tensors, and compiled: inductor fuses it
into one loop (CPU) or one kernel (CUDA) per tensor that reads the
gradient, both moments and the weight once and writes them once, where the
multi-tensor path (spam_foreach.py) runs about twenty passes.

One graph serves every step: the values that change between steps (the
step size with its bias corrections and warmup factor, the decay factor)
and the clip switch enter as 0-dim float32 tensors, so nothing
recompiles.  A call that does not clip passes theta = inf: then
|g| > sqrt(inf * v) is false for every entry (NaN where v is 0, and a
comparison with NaN is false), so g passes unchanged and nothing is
counted, exactly as the eager paths skip the clip.  The decay factor
1 - lr * wd is 1 when wd is 0, and p * 1 is p.

Compilation costs tens of seconds on the first step (one graph per
parameter group); if it fails, the optimizer falls back to the
multi-tensor path for good and says why (AdamWSPAM.impl).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from lib.optim.spam_foreach import step_size

_COMPILED: dict[tuple[bool, bool], Callable[..., Tensor]] = {}


def _spam_math(
    params: list[Tensor],
    grads: list[Tensor],
    exp_avgs: list[Tensor],
    exp_avg_sqs: list[Tensor],
    maxes: list[Tensor],
    theta: Tensor,
    beta1: float,
    beta2: float,
    eps: float,
    value: Tensor,
    decay: Tensor,
    *,
    spare_unseen: bool,
    amsgrad: bool,
) -> Tensor:
    count = torch.zeros((), dtype=torch.int64, device=params[0].device)
    for i, (p, g, m, v) in enumerate(zip(params, grads, exp_avgs, exp_avg_sqs)):
        # spam.py _clip: copysign(sqrt(theta*v), g) where |g| > sqrt(theta*v)
        limit = (v * theta).sqrt()
        mask = g.abs() > limit
        if spare_unseen:
            mask = mask & (limit > 0)
        count = count + mask.sum()
        g = torch.where(mask, limit.copysign(g), g)
        m.mul_(beta1).add_(g, alpha=1 - beta1)
        v.mul_(beta2).add_((1 - beta2) * g * g)  # addcmul_'s CPU association: (value * g) * g
        if amsgrad:  # AMSGrad: divide by the running maximum of v
            maxes[i].copy_(torch.maximum(maxes[i], v))
            v = maxes[i]
        p.add_((value * m) / (v.sqrt() + eps))  # addcdiv_'s CPU association
        p.mul_(decay)
    return count


def compiled_math(spare_unseen: bool, amsgrad: bool = False) -> Callable[..., Tensor]:
    """The compiled step (created once per process and setting)."""
    key = (spare_unseen, amsgrad)
    if key not in _COMPILED:

        def math(*args: Any) -> Tensor:
            return _spam_math(*args, spare_unseen=spare_unseen, amsgrad=amsgrad)

        _COMPILED[key] = torch.compile(math, dynamic=False, fullgraph=True)
    return _COMPILED[key]


def step_group_compiled(
    group: dict[str, Any],
    params: list[Tensor],
    state: dict[Tensor, Any],
    scale: float,
    clip: bool,
    spare_unseen: bool,
    counts: dict[torch.device, Tensor],
) -> None:
    """spam_foreach.step_group's contract, through the compiled step."""
    buckets: dict[tuple[torch.device, torch.dtype, float], list[Tensor]] = {}
    for p in params:
        buckets.setdefault((p.device, p.dtype, float(state[p]["step"])), []).append(p)
    beta1, beta2 = group["betas"]
    lr, wd = group["lr"], group["weight_decay"]
    for (device, _, done), ps in buckets.items():
        # float32 0-dim CPU tensors: the eager kernels round these scalars to float32 too
        theta = torch.tensor(group["theta"] if clip else float("inf"), dtype=torch.float32)
        value = torch.tensor(-step_size(lr, beta1, beta2, done + 1) * scale, dtype=torch.float32)
        decay = torch.tensor(1 - lr * wd if wd > 0 else 1.0, dtype=torch.float32)
        amsgrad = bool(group["amsgrad"])
        count = compiled_math(spare_unseen, amsgrad)(
            ps,
            [p.grad for p in ps],
            [state[p]["exp_avg"] for p in ps],
            [state[p]["exp_avg_sq"] for p in ps],
            [state[p]["max_exp_avg_sq"] for p in ps] if amsgrad else [],
            theta.to(device),
            beta1,
            beta2,
            group["eps"],
            value.to(device),
            decay.to(device),
        )
        for p in ps:  # after the call: a failed compile leaves the state as it was
            state[p]["step"] += 1
        if clip:
            acc = counts.get(device)
            counts[device] = count if acc is None else acc.add_(count)
