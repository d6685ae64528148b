"""Rules across symbols that Kconfig cannot express, checked whenever a
configuration is loaded or written (lib/config/run_config.check_rules). Kept
free of torch so configuration commands stay fast: a family's config class is
plain Python (gpt2/config.py, hamt/config.py)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from lib.model import registry

if TYPE_CHECKING:
    from lib.config.run_config import RunConfig


def check_optimizer(run: RunConfig) -> list[str]:
    """SPAM's no-clipping window must fit between two resets, and clipping must
    not start while the second moment is still zero. A warmup longer than the
    reset interval is allowed, as in the authors' code: the update then never
    reaches full scale again after the first reset."""
    problems = []
    skip = run.SPAM_CLIP_SKIP_STEPS  # None unless SPAM's clipping is on
    interval = run.SPAM_INTERVAL  # None unless SPAM's resets are on
    if skip is not None and interval is not None and skip >= interval:
        problems.append(f"CONFIG_SPAM_CLIP_SKIP_STEPS={skip} must be below "
                        f"CONFIG_SPAM_INTERVAL={interval}: no call would ever be clipped")
    if skip is not None and skip < 2 and not run.SPAM_CLIP_SPARE_UNSEEN:
        problems.append(f"CONFIG_SPAM_CLIP_SKIP_STEPS={skip} clips call 1 "
                        f"against a zero second moment, which sets every gradient entry to 0; "
                        f"use 2 or more, or set CONFIG_SPAM_CLIP_SPARE_UNSEEN=y")
    return problems


def check_pruning(run: RunConfig) -> list[str]:
    """The sparsity ramp must start after warmup and end within the run."""
    warmup, ramp_end = run.PRUNING_WARMUP, run.PRUNING_RAMP_END
    if warmup is None or ramp_end is None:  # hidden exactly when PRUNING_MODE_NONE
        return []
    problems = []
    if warmup >= ramp_end:
        problems.append(f"CONFIG_PRUNING_WARMUP={warmup} must be below "
                        f"CONFIG_PRUNING_RAMP_END={ramp_end}")
    if ramp_end > run.GPT2_MAX_ITERS:
        problems.append(f"CONFIG_PRUNING_RAMP_END={ramp_end} is past "
                        f"CONFIG_GPT2_MAX_ITERS={run.GPT2_MAX_ITERS}: the run would end below "
                        f"the target sparsity; lower the ramp end or train longer")
    return problems


def check_family(run: RunConfig) -> list[str]:
    """The family's own config class checks its fields (n_embd % n_head, ...)."""
    try:
        registry.family(run.MODEL).from_run_config(run, 50257)
    except ValueError as err:
        return [str(err)]
    return []
