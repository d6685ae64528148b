"""AdamWSPAM's eager step (the "foreach" and "loop" paths of lib/optim/spam.py).

spam.py's AdamWSPAM decides everything a call needs (reset, clipping window,
warmup factor, spike damping, the step value with the bias corrections) and
hands each path a Bucket: tensors of one parameter group that share device,
dtype and step count (one count unless some parameter missed steps for want
of a gradient), with this call's scalars.  step() below applies items 2-4
and 6 of spam.py's rule to a bucket with torch._foreach_* kernels: about
twenty multi-tensor kernels per step.  The multi-tensor path (foreach=True)
passes whole buckets, the per-parameter path (foreach=False: one tensor's
temporaries at a time, as torch's foreach=False) one-tensor buckets
(Bucket.split()), so both run the same operations and agree to the bit; the
one-pass path (spam_fused.py) compiles the same rule written per tensor.

Spike clipping without a per-tensor where(), with c = sqrt(theta * v_prev):

    g'  = clamp(g, -c, c)         # == where(|g| > c, copysign(c, g), g)
    clipped += sum |sign(g - g')| # entries changed; summed on the device, no host sync

With spare_unseen, entries whose v_prev is 0 are left alone:
lim = c + BIG * (1 - sign(c)) replaces c (BIG, the dtype's max, where
v_prev == 0: no limit).  The values are those of where(): clamp returns g
itself or +-c.  One difference, in a state that is already ruined: with
spare_unseen an infinite gradient entry whose v_prev is 0 is passed on as
+-BIG (where() would pass +-inf).  p.grad is never written.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import torch
from torch import Tensor

from lib.optim.spike import EXP_AVG_FACTOR, EXP_AVG_SQ_FACTOR

# The clip count is a float sum of 0/1 entries, exact up to 2**24 terms; tensors
# are summed in pieces of at most this many entries, the pieces as integers.
COUNT_PIECE = 1 << 24


@dataclasses.dataclass
class Bucket:
    """One call's work on tensors of one group with one device, dtype and step count."""

    params: list[Tensor]
    grads: list[Tensor]
    exp_avgs: list[Tensor]
    exp_avg_sqs: list[Tensor]
    maxes: list[Tensor] | None  # AMSGrad's running maxima of v (state "max_exp_avg_sq")
    steps: list[Tensor]  # the state's "step" counts, all equal; spam.py advances them
    beta1: float
    beta2: float
    eps: float
    theta: float | None  # None: this call does not clip
    value: float  # -lr * sqrt(1 - b2^t) / (1 - b1^t) * warmup factor, t after this call
    decay: float  # 1 - lr * weight_decay (1.0 without decay)
    spare_unseen: bool
    key: int  # the group's id: the one-pass path keeps its device scalars under it

    def split(self) -> Iterator[Bucket]:
        """One bucket per tensor (the per-parameter path)."""
        for i in range(len(self.params)):
            yield dataclasses.replace(
                self,
                params=self.params[i : i + 1],
                grads=self.grads[i : i + 1],
                exp_avgs=self.exp_avgs[i : i + 1],
                exp_avg_sqs=self.exp_avg_sqs[i : i + 1],
                maxes=None if self.maxes is None else self.maxes[i : i + 1],
                steps=self.steps[i : i + 1],
            )


def step(b: Bucket, counter: Tensor, damp: bool = False) -> None:
    """Items 2-4 and 6 of spam.py's rule on b; counter (int64, b's device) += entries
    clipped.  damp: the spike damping, after clipping and before the moments."""
    grads = b.grads
    if b.theta is not None:
        grads, count = clip_spikes(grads, b.exp_avg_sqs, b.theta, b.spare_unseen)
        counter.add_(count)
    if damp:
        damp_(b.exp_avgs, b.exp_avg_sqs)
    scale_(b.exp_avgs, b.beta1)
    torch._foreach_add_(b.exp_avgs, grads, alpha=1 - b.beta1)
    scale_(b.exp_avg_sqs, b.beta2)
    torch._foreach_addcmul_(b.exp_avg_sqs, grads, grads, value=1 - b.beta2)
    del grads
    if b.maxes is not None:
        torch._foreach_maximum_(b.maxes, b.exp_avg_sqs)
    denom = torch._foreach_sqrt(b.exp_avg_sqs if b.maxes is None else b.maxes)
    torch._foreach_add_(denom, b.eps)
    torch._foreach_addcdiv_(b.params, b.exp_avgs, denom, value=b.value)
    del denom
    if b.decay != 1.0:
        scale_(b.params, b.decay)


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


def damp_(exp_avgs: list[Tensor], exp_avg_sqs: list[Tensor]) -> None:
    """The spike damping (lib/optim/spike.py): m *= 0.5, v *= 0.9."""
    scale_(exp_avgs, EXP_AVG_FACTOR)
    scale_(exp_avg_sqs, EXP_AVG_SQ_FACTOR)


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
