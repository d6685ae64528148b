"""Learning rate schedules (LR_SCHEDULE): every one warms up linearly, then

- cosine: a half cosine from the peak to GPT2_MIN_LR over the rest of the run
  (GPT-2, nanoGPT; the default);
- wsd, warmup-stable-decay: the peak until the last LR_DECAY_FRACTION of the
  run, then a linear, cosine or 1-sqrt decay to GPT2_MIN_LR: torchtitan's
  linear_warmup_stable_decay shapes, Hägele et al. 2024's 1-sqrt (MiniCPM's WSD,
  Hu et al. 2024, decays exponentially; that shape is not offered);
- constant: the peak until the end.

Steps are 0-based optimizer steps of a run of `total`. Warmup gives step s <
warmup peak * (s + 1) / warmup, so no step is spent at LR 0. A decay reaches
its minimum at step `total`, the step after the last, so the last step still
trains; past `total` the LR stays where the schedule ends.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from lib.config.run_config import value_or

if TYPE_CHECKING:
    from lib.config.run_config import RunConfig

SCHEDULES = ("cosine", "wsd", "constant")
# Decay shapes: the fraction of (peak - minimum) left at decay progress p in [0, 1].
SHAPES: dict[str, Callable[[float], float]] = {
    "linear": lambda p: 1.0 - p,
    "cosine": lambda p: 0.5 * (1.0 + math.cos(math.pi * p)),
    "sqrt": lambda p: 1.0 - math.sqrt(p),  # "1-sqrt", Hägele et al. 2024 (arXiv 2405.18392)
}


def lr_at(step: int, *, peak: float, minimum: float, warmup: int, total: int) -> float:
    """Cosine: warmup, then a half cosine from `peak` to `minimum` at step `total`."""
    if step < warmup:
        return peak * (step + 1) / warmup
    if step >= total:
        return minimum
    progress = (step - warmup) / max(1, total - warmup)
    return minimum + 0.5 * (1.0 + math.cos(math.pi * progress)) * (peak - minimum)


def decay_steps(total: int, warmup: int, fraction: float) -> int:
    """Steps of the WSD decay: round(total * fraction) (Python's rounding, as
    torchtitan's), at most what warmup leaves. A configuration where it would
    not fit is refused when loaded (lib/train/rules.py); the cap
    keeps a run recorded before that rule training as it did."""
    return max(0, min(round(total * fraction), total - warmup))


def wsd_at(
    step: int, *, peak: float, minimum: float, warmup: int, total: int, decay: int, shape: str
) -> float:
    """Warmup-stable-decay: `peak` from the end of warmup to step total - decay,
    then SHAPES[shape] of the progress (step - (total - decay)) / decay, which
    is 1/decay on the first decay step and 1 at `total`. decay 0: no decay."""
    if step < warmup:
        return peak * (step + 1) / warmup
    start = total - decay
    if decay <= 0 or step <= start:
        return peak
    progress = min(1.0, (step - start) / decay)
    return minimum + SHAPES[shape](progress) * (peak - minimum)


def constant_at(step: int, *, peak: float, warmup: int) -> float:
    return peak * (step + 1) / warmup if step < warmup else peak


def schedule_settings(run: RunConfig) -> dict[str, Any]:
    """The schedule's name and the numbers it uses (recorded in metrics.json
    as "lr_schedule")."""
    name = value_or(run.LR_SCHEDULE, "cosine")
    total, warmup = run.GPT2_MAX_ITERS, run.GPT2_WARMUP_STEPS
    out: dict[str, Any] = {
        "name": name,
        "peak": run.LEARNING_RATE,
        "warmup_steps": warmup,
        "total_steps": total,
    }
    if name == "constant":
        return out
    out["min_lr"] = value_or(run.GPT2_MIN_LR, 0.0)
    if name == "wsd":
        fraction = value_or(run.LR_DECAY_FRACTION, 0.2)
        decay = decay_steps(total, warmup, fraction)
        out |= {
            "decay_fraction": fraction,
            "decay_steps": decay,
            "decay_start": total - decay,
            "decay_shape": value_or(run.LR_DECAY_SHAPE, "linear"),
        }
    return out


def lr_schedule(run: RunConfig) -> Callable[[int], float]:
    """The run's LR as a function of the 0-based optimizer step."""
    s = schedule_settings(run)
    common = dict(peak=s["peak"], warmup=s["warmup_steps"])
    if s["name"] == "constant":
        return partial(constant_at, **common)
    common |= dict(minimum=s["min_lr"], total=s["total_steps"])
    if s["name"] == "wsd":
        return partial(wsd_at, **common, decay=s["decay_steps"], shape=s["decay_shape"])
    return partial(lr_at, **common)
