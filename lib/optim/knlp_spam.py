"""AdamWSPAM as mcgrof/knlp's GPT-2 trainer runs it (SPAM_RULE_KNLP).

knlp (at 041ec5f2: lib/optimizers.py, gpt2/trainers/vanilla.py) names its
optimizer AdamWSPAM but runs a rule of its own around torch's AdamW with
AMSGrad, not the SPAM authors' algorithm (lib/optim/spam.py). Restated in
optimizer steps k = 1, 2, ... (the rule's parameters are this project's:
the translation from knlp's own units is lib/config/knlp/names.py):

Before the trainer's gradient-norm clip, with the gradients final and
unscaled (and pruned gradients masked), in this order (before_clip()):
1. Clipping (clip): every gradient entry of a parameter that already has
   Adam state (from the second step on) with |g| > sqrt(theta (v + 1e-12)),
   v the raw second moment, becomes sign(g) sqrt(theta (v + 1e-12)); the
   gradient itself is changed, so the norm clip sees the clipped values.
2. Spike damping (spike_reset): the global gradient norm, measured after
   item 1, goes to lib/optim/spike.py's z-score test; on a spike every
   parameter's m *= 0.5 and v *= 0.9 (AMSGrad's maximum is left alone).
3. Reset (interval > 0): at steps that are multiples of interval, m and v of
   every parameter with state are zeroed (not AMSGrad's maximum, nor the
   bias-correction count), and the LR re-warmup restarts.
4. LR re-warmup (warmup_steps = N > 0): on the j-th step from a reset
   (j = 0 on the reset step) while j < N, each group's LR (as the trainer set
   it for this step) is multiplied by max(1e-3, (1 - cos(pi j / N)) / 2) for
   this update; step() puts the LR back.
Then step(): torch's AdamW (decay before the update, eps after bias
correction, AMSGrad as asked). A caller that does not call before_clip()
gets it from step() itself, after its own clipping, if any.

The step count, the re-warmup position, the recent gradient norms and the
counters are saved under the key "knlp_spam" of state_dict(), so a resumed
run continues bit-identically.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

import torch

from lib.optim.spike import EXP_AVG_FACTOR, EXP_AVG_SQ_FACTOR, SpikeDetector, grad_norm

CLIP_EPS = 1e-12  # added to v under the clipping threshold's root (knlp's constant)
LR_FLOOR = 1e-3  # smallest LR factor of the re-warmup


class KnlpAdamWSPAM(torch.optim.AdamW):
    """torch AdamW plus knlp's clipping, spike damping, resets and LR re-warmup."""

    # AdamW keeps an all-zero entry (weight, moments, gradient) at zero, and so do
    # clipping, damping and resets: the pruner need not re-apply its masks.
    keeps_zero_entries = True

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.1,
        *,
        amsgrad: bool = True,
        theta: float = 50.0,
        clip: bool = True,
        interval: int = 500,
        warmup_steps: int = 100,
        spike_reset: bool = True,
        spike_threshold: float = 2.0,
        **impl: Any,  # torch AdamW's fused / foreach
    ) -> None:
        if not theta > 0:
            raise ValueError(f"invalid theta: {theta!r} (allowed: > 0)")
        for name, value in (("interval", interval), ("warmup_steps", warmup_steps)):
            if int(value) != value or value < 0:
                raise ValueError(f"invalid {name}: {value!r} (allowed: integer >= 0)")
        super().__init__(
            params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad, **impl
        )
        self.theta = float(theta)
        self.clip = bool(clip)
        self.interval = int(interval)
        self.warmup_steps = int(warmup_steps)
        self.spike = SpikeDetector(spike_threshold) if spike_reset else None
        self._calls = 0  # k of the latest before_clip()
        self._since_reset = -1  # j of the latest step; -1: no reset yet
        self._pending = False  # before_clip() ran for a step that step() has not taken
        self._set_lrs: list[float] = []  # the groups' LRs as the caller set them
        self._clipped = 0
        self._clipped_dev: dict[torch.device, torch.Tensor] = {}
        self._resets = 0
        self._spike_resets = 0

    def lr_scale(self, j: int) -> float:
        """The LR factor j steps after a reset (item 4; 1 outside the re-warmup)."""
        n = self.warmup_steps
        if j < 0 or j >= n:
            return 1.0
        return max(LR_FLOOR, 0.5 * (1 - math.cos(math.pi * j / n)))

    def _with_state(self) -> list[torch.Tensor]:
        return [p for g in self.param_groups for p in g["params"] if "exp_avg_sq" in self.state[p]]

    @torch.no_grad()
    def before_clip(self) -> None:
        """Items 1 to 4 of the module doc for the coming step."""
        self._calls += 1
        self._pending = True
        if self.clip:
            self._clip_gradients()
        if self.spike is not None:
            params = [p for g in self.param_groups for p in g["params"]]
            if self.spike.observe(grad_norm(params)):
                self._spike_resets += 1
                for p in self._with_state():
                    self.state[p]["exp_avg"].mul_(EXP_AVG_FACTOR)
                    self.state[p]["exp_avg_sq"].mul_(EXP_AVG_SQ_FACTOR)
        if self.interval > 0 and self._calls % self.interval == 0:
            self._resets += 1
            self._since_reset = 0
            for p in self._with_state():
                self.state[p]["exp_avg"].zero_()
                self.state[p]["exp_avg_sq"].zero_()
        elif self._since_reset >= 0:
            self._since_reset += 1
        scale = self.lr_scale(self._since_reset)
        self._set_lrs = [group["lr"] for group in self.param_groups]
        for group in self.param_groups:
            group["lr"] = group["lr"] * scale

    def _clip_gradients(self) -> None:
        for p in self._with_state():
            if p.grad is None:
                continue
            limit = (self.theta * (self.state[p]["exp_avg_sq"] + CLIP_EPS)).sqrt()
            over = p.grad.abs() > limit
            p.grad.copy_(torch.where(over, limit.copysign(p.grad), p.grad))
            count = over.sum()
            acc = self._clipped_dev.get(count.device)
            self._clipped_dev[count.device] = count if acc is None else acc.add_(count)

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None) -> float | None:
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        if not self._pending:
            self.before_clip()
        self._pending = False
        super().step()
        # Scaled for this update only: a caller that sets no LR per step keeps its own.
        for group, lr in zip(self.param_groups, self._set_lrs):
            group["lr"] = lr
        return loss

    # -- counters and checkpoints ----------------------------------------
    def _flush(self) -> None:
        for acc in self._clipped_dev.values():
            self._clipped += int(acc.item())
        self._clipped_dev.clear()

    def stats(self) -> dict[str, int]:
        """The same counters as AdamWSPAM's (metrics.json's spam_*)."""
        self._flush()
        out = {"spikes_clipped": self._clipped, "resets": self._resets}
        if self.spike is not None:
            out["spike_resets"] = self._spike_resets
        return out

    def state_dict(self) -> dict[str, Any]:
        sd = super().state_dict()
        self._flush()
        sd["knlp_spam"] = {
            "calls": self._calls,
            "since_reset": self._since_reset,
            "clipped": self._clipped,
            "resets": self._resets,
            "spike_resets": self._spike_resets,
            "norms": self.spike.state_dict()["norms"] if self.spike is not None else [],
        }
        return sd

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        state_dict = dict(state_dict)
        extra = state_dict.pop("knlp_spam", None) or {}
        super().load_state_dict(state_dict)
        self._flush()
        self._calls = int(extra.get("calls", self._calls))
        self._since_reset = int(extra.get("since_reset", self._since_reset))
        self._clipped = int(extra.get("clipped", self._clipped))
        self._resets = int(extra.get("resets", self._resets))
        self._spike_resets = int(extra.get("spike_resets", self._spike_resets))
        if self.spike is not None and "norms" in extra:
            self.spike.load_state_dict({"norms": list(extra["norms"])})
