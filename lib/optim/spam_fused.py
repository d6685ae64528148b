"""AdamWSPAM's one-pass step (OPTIMIZER_IMPL=fused): clip, moments, update, decay fused.

Items 2-4 and 6 of spam.py's rule on a Bucket (spam_foreach.py), the one
the eager paths get, written per tensor (the clip as where(|g| > c,
copysign(c, g), g), the values spam_foreach.clip_spikes gives) and compiled
by torch.compile, so that inductor emits one loop (CPU) or one kernel
(CUDA) per tensor that reads the gradient, both moments and the weight once
and writes them once; the multi-tensor path makes about twenty passes.
Everything else (reset, clipping window, warmup, step counts, the scalars'
values) is spam.py's, shared with the eager paths.

The scalars stay on the device and nothing is read back, so a step never
waits for the device:
- the step value (-lr times the bias corrections times the warmup factor)
  changes every call; spam.py computes it from its own counts (the
  state's CPU "step" tensors) and this module writes it into a device scalar with
  torch.full, a fill kernel with the number as its argument: no host-to-
  device copy (a copy from pageable memory waits for the stream), no sync;
- theta, theta = inf (a call that does not clip: |g| > sqrt(inf * v) is
  false for every entry, NaN where v is 0, so g passes unchanged and
  nothing is counted) and the decay factor 1 - lr * wd are device scalars
  kept between calls, refilled only when a value changes (a decay under
  an LR schedule: once per call);
- the clip count is added to the device counter inside the compiled step.
The scalars have the parameters' dtype when it is float64 and float32
otherwise, the precision the eager kernels compute in on CPU.

One graph serves every call of a group: nothing recompiles (a bucket of
other tensors, e.g. a parameter that had no gradient this call, is another
graph; past dynamo's limit of 8 per process the step falls back).  Resets (one
call in SPAM_INTERVAL) zero the moments before the step, as the eager paths
do; a spike-damping call (SPAM_SPIKE_RESET, rare) takes the multi-tensor
path.  Compiling costs tens of seconds on the first step; if it fails, the
optimizer falls back to the multi-tensor path for good and says why
(AdamWSPAM.impl).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from lib.optim.spam_foreach import Bucket

_COMPILED: dict[tuple[bool, bool], Callable[..., None]] = {}


def spam_math(
    params: list[Tensor],
    grads: list[Tensor],
    exp_avgs: list[Tensor],
    exp_avg_sqs: list[Tensor],
    maxes: list[Tensor],
    counter: Tensor,
    theta: Tensor,
    value: Tensor,
    decay: Tensor,
    beta1: float,
    beta2: float,
    eps: float,
    *,
    spare_unseen: bool,
    amsgrad: bool,
) -> None:
    """Items 2 to 4 and 6 of spam.py's rule for every tensor; counter += entries clipped."""
    count = torch.zeros((), dtype=torch.int64, device=counter.device)
    for i, (p, g, m, v) in enumerate(zip(params, grads, exp_avgs, exp_avg_sqs)):
        limit = (v * theta).sqrt()  # copysign(limit, g) where |g| > limit
        mask = g.abs() > limit
        if spare_unseen:
            mask = mask & (limit > 0)
        count = count + mask.sum()
        g = torch.where(mask, limit.copysign(g), g)
        m.mul_(beta1).add_(g, alpha=1 - beta1)
        v.mul_(beta2).add_((1 - beta2) * g * g)  # addcmul_'s CPU association: (value * g) * g
        if amsgrad:  # divide by the running maximum of v
            maxes[i].copy_(torch.maximum(maxes[i], v))
            v = maxes[i]
        p.add_((value * m) / (v.sqrt() + eps))  # addcdiv_'s CPU association
        p.mul_(decay)
    counter.add_(count)


def compiled_math(spare_unseen: bool, amsgrad: bool = False) -> Callable[..., None]:
    """The compiled step (created once per process and setting)."""
    key = (spare_unseen, amsgrad)
    if key not in _COMPILED:

        def math(*args: Any) -> None:
            spam_math(*args, spare_unseen=spare_unseen, amsgrad=amsgrad)

        _COMPILED[key] = torch.compile(math, dynamic=False, fullgraph=True)
    return _COMPILED[key]


class FusedSteps:
    """The device scalars of one optimizer's one-pass steps, kept between calls."""

    def __init__(self) -> None:
        self._scalars: dict[tuple[Any, ...], tuple[float, Tensor]] = {}

    def scalar(self, name: Any, value: float, device: torch.device, dtype: torch.dtype) -> Tensor:
        """A 0-dim device tensor holding `value`, refilled in place when the value changes."""
        key = (name, device, dtype)
        held = self._scalars.get(key)
        if held is None:
            tensor = torch.full((), value, dtype=dtype, device=device)
        elif held[0] != value:
            tensor = held[1].fill_(value)  # a fill kernel: no copy from the host, no sync
        else:
            return held[1]
        self._scalars[key] = (value, tensor)
        return tensor

    def step(self, b: Bucket, counter: Tensor) -> None:
        """spam_foreach.step's contract (without damping), in one pass per tensor."""
        device, dtype = b.params[0].device, b.params[0].dtype
        sdtype = torch.float64 if dtype == torch.float64 else torch.float32
        clip = b.theta is not None
        theta = b.theta if b.theta is not None else float("inf")
        compiled_math(b.spare_unseen, b.maxes is not None)(
            b.params,
            b.grads,
            b.exp_avgs,
            b.exp_avg_sqs,
            b.maxes or [],
            counter,
            self.scalar((b.key, "theta", clip), theta, device, sdtype),
            self.scalar((b.key, "value"), b.value, device, sdtype),
            self.scalar((b.key, "decay"), b.decay, device, sdtype),
            b.beta1,
            b.beta2,
            b.eps,
        )
