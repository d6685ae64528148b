"""Learning rate: linear warmup, then cosine decay to the minimum."""
from __future__ import annotations

import math
from functools import partial
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from lib.config.run_config import RunConfig


def lr_at(step: int, *, peak: float, minimum: float, warmup: int, total: int) -> float:
    """LR for optimizer step `step` (0-based) of `total`.

    Warmup rises linearly to `peak` over `warmup` steps (step 0 already gets
    peak/warmup, so no step is wasted at LR 0); then a half cosine takes it
    to `minimum` at step `total`; past `total` it stays at `minimum`.
    """
    if step < warmup:
        return peak * (step + 1) / warmup
    if step >= total:
        return minimum
    progress = (step - warmup) / max(1, total - warmup)
    return minimum + 0.5 * (1.0 + math.cos(math.pi * progress)) * (peak - minimum)


def lr_schedule(run: RunConfig) -> Callable[[int], float]:
    """The run's LR as a function of the 0-based optimizer step."""
    return partial(lr_at, peak=run.LEARNING_RATE, minimum=run.GPT2_MIN_LR,
                   warmup=run.GPT2_WARMUP_STEPS, total=run.GPT2_MAX_ITERS)
