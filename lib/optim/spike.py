"""Gradient-norm spike test of knlp's AdamWSPAM (SPAM_SPIKE_RESET).

The rule of mcgrof/knlp at 041ec5f2 (lib/optimizers.py,
apply_spam_gradient_processing), restated: each optimizer step's global
gradient norm (the 2-norm over every parameter that has a gradient) is kept
when finite, the last 100 kept. Once 10 are kept, the newest is a spike when
its z-score against the others, (norm - mean) / std with the population
standard deviation, exceeds the threshold (knlp: 2.0) and std > 0. On a
spike the optimizer damps its moments: m *= 0.5, v *= 0.9 (knlp's "soft"
reset); AMSGrad's running maximum of v is left alone.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable

import torch

HISTORY = 100  # norms kept, the newest included
MIN_NORMS = 10  # no test before this many are kept
EXP_AVG_FACTOR = 0.5  # m on a spike
EXP_AVG_SQ_FACTOR = 0.9  # v on a spike


def grad_norm(params: Iterable[torch.Tensor]) -> float:
    """The global 2-norm of the gradients of `params`, summed in float64 (a host sync)."""
    by_device: dict[torch.device, list[torch.Tensor]] = {}
    for p in params:
        if p.grad is not None:
            by_device.setdefault(p.grad.device, []).append(p.grad)
    total = 0.0
    for grads in by_device.values():
        norms = torch.stack([n.to(torch.float64) for n in torch._foreach_norm(grads)])
        total += float(norms.square().sum())
    return math.sqrt(total)


class SpikeDetector:
    """Keeps the recent gradient norms and says whether the newest is a spike."""

    def __init__(self, threshold: float) -> None:
        if not threshold > 0:
            raise ValueError(f"invalid spike threshold: {threshold!r} (allowed: > 0)")
        self.threshold = float(threshold)
        self.norms: deque[float] = deque(maxlen=HISTORY)

    def observe(self, norm: float) -> bool:
        """Record this step's norm; True when it is a spike (see the module doc)."""
        if not math.isfinite(norm):
            return False  # not kept, and its z-score is not finite: no damping
        self.norms.append(norm)
        if len(self.norms) < MIN_NORMS:
            return False
        history = list(self.norms)[:-1]
        mean = sum(history) / len(history)
        std = math.sqrt(sum((x - mean) ** 2 for x in history) / len(history))
        return std > 0 and (norm - mean) / std > self.threshold

    def state_dict(self) -> dict[str, object]:
        return {"norms": list(self.norms)}

    def load_state_dict(self, state: dict[str, object]) -> None:
        norms = state.get("norms", [])
        assert isinstance(norms, list)
        self.norms = deque((float(x) for x in norms), maxlen=HISTORY)
