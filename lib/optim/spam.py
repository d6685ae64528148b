"""AdamWSPAM: spike-aware AdamW with periodic momentum reset.

Implements SPAM (Huang et al., ICLR 2025, "SPAM: Spike-Aware Adam with
Momentum Reset for Stable LLM Training", arXiv 2501.06842) as a drop-in
replacement for torch.optim.AdamW (decoupled weight decay).

Global step t (1-based, counted by this optimizer, shared by all params):

1. Momentum reset (paper): if reset and interval > 0 and t % interval == 0,
   m and v of every parameter are zeroed at the START of step t, before its
   clipping and update.  Resets happen at t = interval, 2*interval, ...; after
   step t the moments therefore hold only step t's gradient:
   m = (1-b1) g_t, v = (1-b2) g_t^2.
2. Spike-aware clipping (paper): with v_prev the raw (not bias-corrected)
   second moment before this step's update, entries with g^2 > theta * v_prev
   become sign(g) * sqrt(theta * v_prev); the test is made as
   |g| > sqrt(theta * v_prev), so that both code paths (item 6) decide alike
   to the last bit.  Choice: entries with v_prev == 0
   (first step, right after a reset, never-seen coordinates) are left alone.
   Because v_prev is raw, the threshold is low in the first steps after the
   start or a reset (v ~ (1-b2^k) E[g^2]): with theta=5000, b2=0.999 and k=1,
   entries larger than ~sqrt(5) x RMS are clipped.  p.grad is not modified.
3. AdamW, written exactly like torch.optim.AdamW(foreach=False):
   p *= 1 - lr*wd; m.lerp_(g, 1-b1); v = b2 v + (1-b2) g^2;
   p -= scale * lr/bc1 * m / (sqrt(v)/sqrt(bc2) + eps).
   Choice: the warmup scale multiplies only the Adam update, not the weight
   decay.  With clip=False and reset=False the result equals torch's AdamW.
4. Cosine warmup after a reset (paper; definition chosen here): with
   N = warmup_steps and k = t - t_reset + 1 (k = 1 on the reset step itself),
   scale = 0.01 + 0.99 * 0.5 * (1 - cos(pi * k / N)) while k < N, else 1.
   So the first N steps of each reset period ramp from ~0.01 to 1.  Choice:
   scale is 1 before the first reset (no warmup at the start of training; the
   trainer has its own LR warmup) and when N == 0.
5. Bias correction (choice, differs from the authors' reference code, which
   keeps counting): the per-parameter count state["step"] RESTARTS at 0 on a
   reset, because the moments restart from zero.  Consequence: right after a
   reset m_hat/sqrt(v_hat) has the size of a fresh Adam step (|.| <= 1 at
   k=1) instead of being inflated by (1-b1^k)/sqrt(1-b2^k) (~3x at k=1, up
   to ~6.5x near k=10 for betas (0.9, 0.999)) as with a non-restarted count.
   state["step"] is a float32 0-dim CPU tensor like torch's and counts steps
   since the last reset (equals the global step until the first reset).
6. Two code paths compute the above: a per-parameter loop (foreach=False,
   the reference, written for reading) and a multi-tensor one (foreach=True,
   lib/optim/spam_foreach.py: a few torch._foreach_* kernels per step instead
   of about a dozen kernels per parameter).  foreach=None, the default, picks
   the multi-tensor path when all parameters are on one device type, as
   torch's optimizers do.  Both give the same results and counters; on CPU,
   where their kernels are the same, to the bit.

State uses torch's names (exp_avg, exp_avg_sq, step).  The global step, the
last reset step and the counters of stats() live on the optimizer and are
saved under the extra key "spam" of state_dict(); load_state_dict() restores
them, so a resumed run continues identically (a state dict without "spam",
e.g. from torch's AdamW, loads too: counters and the reset schedule then
continue from this optimizer's current values).  Clip counts accumulate on the
parameters' device without host syncs until stats() or state_dict().
"""
from __future__ import annotations

import math
from typing import Any, Callable, Iterable

import torch

from lib.optim.spam_foreach import step_group

_FLOOR = 0.01  # warmup starts from about 1% of the update, not zero


def _check(name: str, ok: bool, allowed: str, value: Any) -> None:
    if not ok:
        raise ValueError(f"invalid {name}: {value!r} (allowed: {allowed})")


class AdamWSPAM(torch.optim.Optimizer):
    """AdamW with spike-aware gradient clipping and periodic momentum reset."""

    def __init__(self, params: Iterable[Any], lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 1e-2, *, theta: float = 5000.0, interval: int = 500,
                 warmup_steps: int = 150, clip: bool = True, reset: bool = True,
                 foreach: bool | None = None) -> None:
        _check("lr", lr > 0, "lr > 0", lr)
        _check("betas", len(betas) == 2, "a pair (beta1, beta2)", betas)
        _check("betas[0]", 0 <= betas[0] < 1, "0 <= beta1 < 1", betas[0])
        _check("betas[1]", 0 <= betas[1] < 1, "0 <= beta2 < 1", betas[1])
        _check("eps", eps > 0, "eps > 0", eps)
        _check("weight_decay", weight_decay >= 0, "weight_decay >= 0", weight_decay)
        _check("theta", theta > 0, "theta > 0", theta)
        _check("interval", int(interval) == interval and interval >= 0,
               "integer >= 0, 0 disables reset", interval)
        _check("warmup_steps", int(warmup_steps) == warmup_steps and warmup_steps >= 0,
               "integer >= 0", warmup_steps)
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                        theta=float(theta), clip=bool(clip))
        super().__init__(params, defaults)
        self.interval = int(interval)
        self.warmup_steps = int(warmup_steps)
        self.reset = bool(reset)
        self.foreach = foreach  # None: decided at each step (item 6)
        self._global_step = 0
        self._last_reset = 0  # global step of the latest reset; 0: none yet
        self._resets = 0
        self._spikes = 0  # host part of spikes_clipped
        self._spikes_dev: dict[torch.device, torch.Tensor] = {}  # pending device counts

    # -- schedule ---------------------------------------------------------
    def update_scale(self, t: int) -> float:
        """Multiplier of the Adam update at global step t (see module doc, item 4)."""
        n = self.warmup_steps
        if self._last_reset == 0 or n == 0:
            return 1.0
        k = t - self._last_reset + 1
        if k >= n:
            return 1.0
        return _FLOOR + (1 - _FLOOR) * 0.5 * (1 - math.cos(math.pi * k / n))

    def _reset_moments(self) -> None:
        for group in self.param_groups:
            for p in group["params"]:
                state = self.state.get(p)
                if state:
                    state["exp_avg"].zero_()
                    state["exp_avg_sq"].zero_()
                    state["step"].zero_()  # bias correction restarts (item 5)

    # -- step -------------------------------------------------------------
    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None) -> float | None:
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        self._global_step += 1
        t = self._global_step
        if self.reset and self.interval > 0 and t % self.interval == 0:
            self._reset_moments()
            self._last_reset = t
            self._resets += 1
        scale = self.update_scale(t)
        foreach = self.uses_foreach()
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            for p in params:
                if p.grad.is_sparse:
                    raise RuntimeError("AdamWSPAM does not support sparse gradients")
                state = self.state[p]
                if not state:
                    state["step"] = torch.tensor(0.0, dtype=torch.float32)
                    state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                    state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            if foreach:
                step_group(group, params, self.state, scale, self._spikes_dev)
            else:
                for p in params:
                    self._step_param(p, group, scale)
        return loss

    def uses_foreach(self) -> bool:
        """Whether step() takes the multi-tensor path (item 6)."""
        if self.foreach is not None:
            return bool(self.foreach)
        return len({p.device.type for g in self.param_groups for p in g["params"]}) <= 1

    def _step_param(self, p: torch.Tensor, group: dict[str, Any], scale: float) -> None:
        """The reference: one parameter, items 2 and 3 of the module doc."""
        beta1, beta2 = group["betas"]
        lr, eps, wd, theta = group["lr"], group["eps"], group["weight_decay"], group["theta"]
        grad, state = p.grad, self.state[p]
        exp_avg, exp_avg_sq, step_t = state["exp_avg"], state["exp_avg_sq"], state["step"]
        if group["clip"] and step_t.item() > 0:  # v_prev is all zero otherwise
            grad = self._clip(grad, exp_avg_sq, theta)
        step_t += 1
        if wd != 0:
            p.mul_(1 - lr * wd)
        exp_avg.lerp_(grad, 1 - beta1)
        exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        step = step_t.item()
        bias_correction1 = 1 - beta1 ** step
        bias_correction2_sqrt = (1 - beta2 ** step) ** 0.5
        denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)
        p.addcdiv_(exp_avg, denom, value=-(lr / bias_correction1) * scale)

    def _clip(self, grad: torch.Tensor, exp_avg_sq: torch.Tensor, theta: float) -> torch.Tensor:
        """copysign(sqrt(theta*v), g) where |g| > sqrt(theta*v) > 0, else g; a new tensor."""
        limit = (exp_avg_sq * theta).sqrt_()
        mask = grad.abs() > limit
        mask.logical_and_(limit > 0)
        acc = self._spikes_dev.get(grad.device)
        count = mask.sum()
        self._spikes_dev[grad.device] = count if acc is None else acc.add_(count)
        return torch.where(mask, limit.copysign_(grad), grad)

    # -- counters and checkpoints ----------------------------------------
    def _flush(self) -> None:
        for acc in self._spikes_dev.values():
            self._spikes += int(acc.item())
        self._spikes_dev.clear()

    def stats(self) -> dict[str, int]:
        """{"spikes_clipped": entries clipped so far, "resets": resets made so far}."""
        self._flush()
        return {"spikes_clipped": self._spikes, "resets": self._resets}

    def state_dict(self) -> dict[str, Any]:
        sd = super().state_dict()
        self._flush()
        sd["spam"] = {"global_step": self._global_step, "last_reset": self._last_reset,
                      "spikes_clipped": self._spikes, "resets": self._resets}
        return sd

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        state_dict = dict(state_dict)
        extra = state_dict.pop("spam", None)
        super().load_state_dict(state_dict)
        for group in self.param_groups:  # e.g. groups saved by torch's AdamW lack theta/clip
            for key, value in self.defaults.items():
                group.setdefault(key, value)
        self._flush()
        if extra is not None:
            self._global_step = int(extra["global_step"])
            self._last_reset = int(extra["last_reset"])
            self._spikes = int(extra["spikes_clipped"])
            self._resets = int(extra["resets"])
