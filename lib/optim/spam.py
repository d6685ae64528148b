"""AdamWSPAM: spike-aware Adam with periodic momentum reset.

SPAM (Huang et al., ICLR 2025, arXiv 2501.06842). By default this does what
the authors' code does, step for step (TianjinYellow/SPAM-Optimizer at
e8185fb, galore_torch/SPAM.py, class `AdamW` exported as `SPAM`, plain
parameter groups; its sparse-momentum `density` path is not implemented),
and the constructor's defaults are theirs (lr 1e-3, betas (0.9, 0.999), eps
1e-6, weight_decay 0, theta 5000, interval 500, warmup_steps 150,
clip_skip_steps 20). With k the 1-based number of the current step() call
and v the raw second moment:

1. Reset: at the start of call k, if k % interval == 0, m and v of every
   parameter that has a gradient are zeroed.  The bias-correction count t
   keeps counting (restart_bias_correction=True zeroes it too: our option).
2. Clipping, only when k >= A and k % interval >= A (A = clip_skip_steps,
   20; without resets only k >= A): no clipping in calls 1 to A-1 nor in
   the A calls from each reset on.  An entry with g^2 > theta * v (v before
   this call's update) becomes sign(g) * sqrt(theta * v); an entry whose v
   is 0 thus becomes 0 (spare_unseen=True leaves it alone: our option).
   Decided as |g| > sqrt(theta * v), so that the code paths (below)
   decide alike to the last bit.  p.grad is not modified (the authors'
   code writes the clipped values into it).
3. Moments, with the clipped g: m = b1 m + (1-b1) g, v = b2 v + (1-b2) g^2.
4. Update: t += 1; p -= lr * s * (sqrt(1 - b2^t) / (1 - b1^t)) * m / (sqrt(v) + eps),
   eps added to the root of the raw v.
5. Warmup factor s from a counter j: s = 1 - 0.99 (1 + cos(pi j / (N+1))) / 2
   while j < N (N = warmup_steps), else 1.  j starts at N+1 (no warmup at
   the start of training), grows by one per call, and is set to 0 at the end
   of the call before each reset: the reset call runs with j = 0, so
   s = 1 - 0.99, and call reset+i with j = i.
6. Weight decay after the update: p -= lr * weight_decay * p (not scaled by s).

Two options come from knlp's AdamWSPAM (mcgrof/knlp at 041ec5f2, which
builds on torch's AdamW with amsgrad=True), both off by default:
- amsgrad: item 4 divides by sqrt(u) + eps, u the running maximum of v
  (state "max_exp_avg_sq", updated after item 3). Clipping (item 2) still
  compares with v, and resets (item 1, and the spike damping below) leave u
  alone, as knlp's do: after a reset the denominator stays at the maximum.
- spike_reset: at the start of each call the global gradient norm goes to
  lib/optim/spike.py's z-score test; on a spike, after item 2 and before
  item 3, m *= 0.5 and v *= 0.9 for every parameter (knlp's "soft reset").
  The norm is measured on the gradient this optimizer receives (after the
  trainer's GPT2_GRAD_CLIP, before item 2): knlp measures it after its own
  per-entry clipping and before its clip at norm 1.0. One host sync per call.

knlp's whole rule (SPAM_RULE_KNLP) is not a path of this class but a
documented variant, lib/optim/knlp_spam.py: torch's AdamW step (eps added
after bias correction, decay before the update) with clipping against
sqrt(theta (v + 1e-12)) written into p.grad before the trainer's norm clip,
from the second step on with no window after resets, the LR (not the
update) re-warmed from 0.1%, and its own state key ("knlp_spam").

One class, one set of hyperparameters, one state layout, three code paths,
chosen as torch.optim.AdamW chooses them (foreach/fused arguments; the
registry's builder, lib/optim/spam_build.py, maps OPTIMIZER_IMPL to them).
step() does everything but the arithmetic once for all paths: the schedule
(items 1, 2's window and 5), the resets, the spike test, the step counts,
and the scalars of the update (bias corrections folded into the step value,
the decay factor, theta), handed to a path as Buckets: parameters of one
group with one device, dtype and step count (lib/optim/spam_foreach.py).
The paths only compute items 2-4 and 6 on a bucket:
- foreach=True: the multi-tensor kernels of spam_foreach.step (torch._foreach_*,
  about twenty kernels per bucket);
- foreach=False: the same kernels one parameter at a time (the temporaries
  of one tensor at a time, as torch's foreach=False);
- fused=True: lib/optim/spam_fused.py, the rule written per tensor and
  compiled by torch.compile into one pass per tensor over p, g, m and v,
  its scalars on the device, never read back; a call that damps (spike_reset)
  takes the multi-tensor path, and if compiling fails the optimizer falls
  back to it for good (`impl` says which path runs and why).
foreach=None, the default, picks the multi-tensor path when all parameters
are on one device type, as torch's optimizers do.  On CPU the loop and the
multi-tensor path agree to the bit, the one-pass path within float rounding
(tests/lib/optim/test_optim_spam_paths.py runs them side by side).

State uses torch's names (exp_avg, exp_avg_sq, step: a float32 0-dim CPU
tensor).  The call count, the warmup counter j and the counters of stats()
live on the optimizer and are saved under the extra key "spam" of
state_dict(); load_state_dict() restores them, so a resumed run continues
identically (a state dict without them, e.g. from torch's AdamW, loads too:
they then continue from this optimizer's current values).  Clip counts
accumulate on the parameters' device without host syncs until stats() or
state_dict().
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

import torch

from lib.optim.spam_foreach import Bucket, damp_
from lib.optim.spam_foreach import step as eager_step
from lib.optim.spam_fused import FusedSteps
from lib.optim.spike import SpikeDetector, grad_norm

_FLOOR = 0.01  # the warmup starts from 1% of the update (0.99 is decayed away)


def _check(name: str, ok: bool, allowed: str, value: Any) -> None:
    if not ok:
        raise ValueError(f"invalid {name}: {value!r} (allowed: {allowed})")


def _is_count(value: Any) -> bool:
    return int(value) == value and value >= 0


class AdamWSPAM(torch.optim.Optimizer):
    """Adam with spike-aware clipping, periodic momentum reset and decoupled weight decay."""

    # An entry whose weight, moments and gradient are 0 stays 0 (clip, moments, update
    # and decay all keep 0): the pruner need not re-apply its masks every step.
    keeps_zero_entries = True

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-6,
        weight_decay: float = 0.0,
        *,
        theta: float = 5000.0,
        interval: int = 500,
        warmup_steps: int = 150,
        clip_skip_steps: int = 20,
        clip: bool = True,
        reset: bool = True,
        restart_bias_correction: bool = False,
        spare_unseen: bool = False,
        amsgrad: bool = False,
        spike_reset: bool = False,
        spike_threshold: float = 2.0,
        foreach: bool | None = None,
        fused: bool = False,
    ) -> None:
        _check("lr", lr > 0, "lr > 0", lr)
        _check("betas", len(betas) == 2, "a pair (beta1, beta2)", betas)
        _check("betas[0]", 0 <= betas[0] < 1, "0 <= beta1 < 1", betas[0])
        _check("betas[1]", 0 <= betas[1] < 1, "0 <= beta2 < 1", betas[1])
        _check("eps", eps > 0, "eps > 0", eps)
        _check("weight_decay", weight_decay >= 0, "weight_decay >= 0", weight_decay)
        _check("theta", theta > 0, "theta > 0", theta)
        _check("interval", _is_count(interval), "integer >= 0, 0 disables reset", interval)
        _check("warmup_steps", _is_count(warmup_steps), "integer >= 0", warmup_steps)
        _check("clip_skip_steps", _is_count(clip_skip_steps), "integer >= 0", clip_skip_steps)
        defaults = dict(
            lr=lr,
            betas=tuple(betas),
            eps=eps,
            weight_decay=weight_decay,
            theta=float(theta),
            clip=bool(clip),
            amsgrad=bool(amsgrad),
        )
        super().__init__(params, defaults)
        self.interval = int(interval)
        self.warmup_steps = int(warmup_steps)
        self.clip_skip_steps = int(clip_skip_steps)
        self.reset = bool(reset) and self.interval > 0
        self.restart_bias_correction = bool(restart_bias_correction)
        self.spare_unseen = bool(spare_unseen)
        self.spike = SpikeDetector(spike_threshold) if spike_reset else None
        self._spike_resets = 0
        self.foreach = foreach  # None: decided at each step (uses_foreach)
        self.fused = bool(fused)
        self.fused_error: str | None = None  # why the compiled path fell back
        self._fused_steps = FusedSteps()  # the one-pass step's device scalars
        self._calls = 0  # k of the latest call
        self._warmup_count = self.warmup_steps + 1  # j of the next call (item 5)
        self._resets = 0
        self._spikes = 0  # host part of spikes_clipped
        self._spikes_dev: dict[torch.device, torch.Tensor] = {}  # pending device counts

    # -- schedule ---------------------------------------------------------
    def resets_at(self, k: int) -> bool:
        """Whether call k starts by zeroing the moments (item 1)."""
        return self.reset and k % self.interval == 0

    def clips_at(self, k: int) -> bool:
        """Whether call k is outside the no-clipping windows (item 2)."""
        skip = self.clip_skip_steps
        return k >= skip and (not self.reset or k % self.interval >= skip)

    def update_scale(self, j: int) -> float:
        """Warmup factor s for warmup counter j (item 5)."""
        n = self.warmup_steps
        if j >= n:
            return 1.0
        return 1 - (1 - _FLOOR) * (1 + math.cos(math.pi * j / (n + 1))) / 2

    # -- step -------------------------------------------------------------
    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None) -> float | None:
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        self._calls += 1
        k = self._calls
        reset = self.resets_at(k)
        self._resets += reset
        scale = self.update_scale(self._warmup_count)
        damp = self._spike()
        per_parameter = not (self.fused or self.uses_foreach())
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            for p in params:
                self._prepare(p, reset, group["amsgrad"])
            if damp:  # parameters without a gradient now: damped here, the others after clipping
                for p in group["params"]:
                    if p.grad is None and self.state[p]:
                        damp_([self.state[p]["exp_avg"]], [self.state[p]["exp_avg_sq"]])
            clip = group["clip"] and self.clips_at(k)
            for bucket in self._buckets(group, params, scale, clip):
                counter = self._counter(bucket.params[0].device)
                # a damping call (rare) takes the eager path: the compiled one has no damping
                if self.fused and not damp and self._step_fused(bucket, counter):
                    pass
                elif per_parameter:
                    for one in bucket.split():
                        eager_step(one, counter, damp)
                else:
                    eager_step(bucket, counter, damp)
                torch._foreach_add_(bucket.steps, 1.0)
        self._warmup_count += 1
        if self.resets_at(k + 1):
            self._warmup_count = 0
        return loss

    def _buckets(
        self, group: dict[str, Any], params: list[torch.Tensor], scale: float, clip: bool
    ) -> list[Bucket]:
        """params (with gradients and state) by device, dtype and step count, each with
        this call's scalars: the one place the group's hyperparameters are read."""
        beta1, beta2 = group["betas"]
        lr, wd = group["lr"], group["weight_decay"]
        by_key: dict[tuple[torch.device, torch.dtype, float], list[torch.Tensor]] = {}
        for p in params:  # "step" is a CPU tensor: no sync
            by_key.setdefault((p.device, p.dtype, float(self.state[p]["step"])), []).append(p)
        buckets = []
        for (_, _, done), ps in by_key.items():
            states = [self.state[p] for p in ps]
            t = done + 1  # the bias-correction count after this call
            buckets.append(
                Bucket(
                    params=ps,
                    grads=[p.grad for p in ps],
                    exp_avgs=[st["exp_avg"] for st in states],
                    exp_avg_sqs=[st["exp_avg_sq"] for st in states],
                    maxes=[st["max_exp_avg_sq"] for st in states] if group["amsgrad"] else None,
                    steps=[st["step"] for st in states],
                    beta1=beta1,
                    beta2=beta2,
                    eps=group["eps"],
                    theta=group["theta"] if clip else None,
                    value=-lr * (math.sqrt(1 - beta2**t) / (1 - beta1**t)) * scale,
                    decay=1 - lr * wd if wd > 0 else 1.0,
                    spare_unseen=self.spare_unseen,
                    key=id(group),
                )
            )
        return buckets

    def _counter(self, device: torch.device) -> torch.Tensor:
        """The device's pending clip count (int64, summed without host syncs)."""
        counter = self._spikes_dev.get(device)
        if counter is None:
            counter = self._spikes_dev[device] = torch.zeros((), dtype=torch.int64, device=device)
        return counter

    def _spike(self) -> bool:
        """Whether this call damps the moments (spike_reset; lib/optim/spike.py)."""
        if self.spike is None:
            return False
        params = [p for g in self.param_groups for p in g["params"]]
        spike = self.spike.observe(grad_norm(params))
        self._spike_resets += spike
        return spike

    def _prepare(self, p: torch.Tensor, reset: bool, amsgrad: bool) -> None:
        """Create p's state on its first gradient; zero its moments on a reset call."""
        if p.grad.is_sparse:
            raise RuntimeError("AdamWSPAM does not support sparse gradients")
        state = self.state[p]
        if not state:
            state["step"] = torch.tensor(0.0, dtype=torch.float32)
            state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
        if amsgrad and "max_exp_avg_sq" not in state:  # also after loading a state without it
            state["max_exp_avg_sq"] = state["exp_avg_sq"].clone()
        if reset:
            state["exp_avg"].zero_()
            state["exp_avg_sq"].zero_()
            if self.restart_bias_correction:
                state["step"].zero_()

    def _step_fused(self, bucket: Bucket, counter: torch.Tensor) -> bool:
        """The compiled step; False (and the multi-tensor path for good) if it fails."""
        try:
            self._fused_steps.step(bucket, counter)
            return True
        except Exception as err:  # any compiler failure: the eager paths give the same step
            self.fused, self.foreach = False, True
            self.fused_error = f"{type(err).__name__}: {err}"[:500]
            return False

    @property
    def impl(self) -> str:
        """The path step() takes: "fused (compiled)", "foreach" or "loop"."""
        if self.fused:
            return "fused (compiled)"
        fell_back = f" (compile failed: {self.fused_error})" if self.fused_error else ""
        return ("foreach" if self.uses_foreach() else "loop") + fell_back

    def uses_foreach(self) -> bool:
        """Whether step() takes the multi-tensor path when not fused (foreach=None: when
        all parameters are on one device type, as torch's optimizers decide)."""
        if self.foreach is not None:
            return bool(self.foreach)
        return len({p.device.type for g in self.param_groups for p in g["params"]}) <= 1

    # -- counters and checkpoints ----------------------------------------
    def _flush(self) -> None:
        for acc in self._spikes_dev.values():
            self._spikes += int(acc.item())
        self._spikes_dev.clear()

    def stats(self) -> dict[str, int]:
        """{"spikes_clipped": entries clipped so far, "resets": resets made so far,
        with spike_reset "spike_resets": dampings made so far}."""
        self._flush()
        out = {"spikes_clipped": self._spikes, "resets": self._resets}
        if self.spike is not None:
            out["spike_resets"] = self._spike_resets
        return out

    def state_dict(self) -> dict[str, Any]:
        sd = super().state_dict()
        self._flush()
        sd["spam"] = {
            "global_step": self._calls,
            "warmup_count": self._warmup_count,
            "spikes_clipped": self._spikes,
            "resets": self._resets,
        }
        if self.spike is not None:
            sd["spam"] |= {
                "spike_resets": self._spike_resets,
                "spike_norms": self.spike.state_dict()["norms"],
            }
        return sd

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        state_dict = dict(state_dict)
        extra = state_dict.pop("spam", None) or {}
        super().load_state_dict(state_dict)
        for group in self.param_groups:  # e.g. groups saved by torch's AdamW lack theta/clip
            for key, value in self.defaults.items():
                group.setdefault(key, value)
        self._flush()
        self._calls = int(extra.get("global_step", self._calls))
        self._warmup_count = int(extra.get("warmup_count", self._warmup_count))
        self._spikes = int(extra.get("spikes_clipped", self._spikes))
        self._resets = int(extra.get("resets", self._resets))
        self._spike_resets = int(extra.get("spike_resets", self._spike_resets))
        if self.spike is not None and "spike_norms" in extra:
            self.spike.load_state_dict({"norms": list(extra["spike_norms"])})
