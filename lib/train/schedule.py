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

if TYPE_CHECKING:
    from lib.config.symbols import Train

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


def schedule_settings(s: Train) -> dict[str, Any]:
    """The schedule's name and the numbers it uses (recorded in metrics.json
    as "lr_schedule")."""
    name = s.LR_SCHEDULE
    total, warmup = s.GPT2_MAX_ITERS, s.GPT2_WARMUP_STEPS
    out: dict[str, Any] = {
        "name": name,
        "peak": s.LEARNING_RATE,
        "warmup_steps": warmup,
        "total_steps": total,
    }
    if name == "constant":
        return out
    out["min_lr"] = s.GPT2_MIN_LR
    if name == "wsd":
        fraction = s.LR_DECAY_FRACTION
        decay = decay_steps(total, warmup, fraction)
        out |= {
            "decay_fraction": fraction,
            "decay_steps": decay,
            "decay_start": total - decay,
            "decay_shape": s.LR_DECAY_SHAPE,
        }
    return out


def lr_schedule(s: Train) -> Callable[[int], float]:
    """The run's LR as a function of the 0-based optimizer step."""
    settings = schedule_settings(s)
    common = dict(peak=settings["peak"], warmup=settings["warmup_steps"])
    if settings["name"] == "constant":
        return partial(constant_at, **common)
    common |= dict(minimum=settings["min_lr"], total=settings["total_steps"])
    if settings["name"] == "wsd":
        decay, shape = settings["decay_steps"], settings["decay_shape"]
        return partial(wsd_at, **common, decay=decay, shape=shape)
    return partial(lr_at, **common)
