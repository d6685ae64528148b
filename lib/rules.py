"""Rules across symbols that Kconfig cannot express, checked whenever a
configuration is loaded or written (lib/config.check_rules). Kept free of
torch so configuration commands stay fast."""
from __future__ import annotations

from typing import Any


def check_optimizer(run: Any) -> list[str]:
    """SPAM's no-clipping window must fit between two resets, and clipping must
    not start while the second moment is still zero. A warmup longer than the
    reset interval is allowed, as in the authors' code: the update then never
    reaches full scale again after the first reset."""
    problems = []
    reset, clip = run.get("SPAM_ENABLE_RESET"), run.get("SPAM_ENABLE_CLIP")
    if reset and clip and run.SPAM_CLIP_SKIP_STEPS >= run.SPAM_INTERVAL:
        problems.append(f"CONFIG_SPAM_CLIP_SKIP_STEPS={run.SPAM_CLIP_SKIP_STEPS} must be below "
                        f"CONFIG_SPAM_INTERVAL={run.SPAM_INTERVAL}: no call would ever be clipped")
    if clip and run.SPAM_CLIP_SKIP_STEPS < 2 and not run.get("SPAM_CLIP_SPARE_UNSEEN"):
        problems.append(f"CONFIG_SPAM_CLIP_SKIP_STEPS={run.SPAM_CLIP_SKIP_STEPS} clips call 1 "
                        f"against a zero second moment, which sets every gradient entry to 0; "
                        f"use 2 or more, or set CONFIG_SPAM_CLIP_SPARE_UNSEEN=y")
    return problems


def check_pruning(run: Any) -> list[str]:
    """The sparsity ramp must start after warmup and end within the run."""
    if run.get("PRUNING_MODE", "none") == "none":
        return []
    problems = []
    if run.PRUNING_WARMUP >= run.PRUNING_RAMP_END:
        problems.append(f"CONFIG_PRUNING_WARMUP={run.PRUNING_WARMUP} must be below "
                        f"CONFIG_PRUNING_RAMP_END={run.PRUNING_RAMP_END}")
    if run.PRUNING_RAMP_END > run.GPT2_MAX_ITERS:
        problems.append(f"CONFIG_PRUNING_RAMP_END={run.PRUNING_RAMP_END} is past "
                        f"CONFIG_GPT2_MAX_ITERS={run.GPT2_MAX_ITERS}: the run would end below "
                        f"the target sparsity; lower the ramp end or train longer")
    return problems
