"""The pruning ramp against the run's length (lib/prune/Kconfig's symbols), and
a score function of the user's, registered with lib/config/rules.py: a ramp
past the end of the run misses its target sparsity. Torch-free (the user's
module aside): it runs on every configuration loaded.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lib.config.rules import rule

if TYPE_CHECKING:
    from lib.config.run_config import RunConfig


@rule
def check_pruning_ramp(run: RunConfig) -> list[str]:
    """The sparsity ramp starts after its warmup and ends within the run."""
    warmup, ramp_end = run.PRUNING_WARMUP, run.PRUNING_RAMP_END
    if warmup is None or ramp_end is None:  # hidden exactly when PRUNING_MODE_NONE
        return []
    total = run.GPT2_MAX_ITERS
    problems = []
    if warmup >= ramp_end:
        problems.append(
            f"CONFIG_PRUNING_WARMUP={warmup} must be below "
            f"CONFIG_PRUNING_RAMP_END={ramp_end}: the ramp would have no steps; "
            f"use PRUNING_WARMUP={ramp_end // 5}"
        )
    if ramp_end > total:
        fits = max(1, total * 4 // 5)
        problems.append(
            f"CONFIG_PRUNING_RAMP_END={ramp_end} is past CONFIG_GPT2_MAX_ITERS="
            f"{total}: the run would end below the target sparsity (SCALE_ITERS={total} in "
            f"place of MAX_ITERS= shortens a run with its ramp, warmup and evaluations); use "
            f"PRUNING_RAMP_END={fits}{f' and PRUNING_WARMUP={fits // 5}' if warmup >= fits else ''} "
            f"or MAX_ITERS={ramp_end}"
        )
    return problems


@rule
def check_custom_score(run: RunConfig) -> list[str]:
    """PRUNING_CUSTOM_SCORE names an importable function of two arguments."""
    if run.PRUNING_CUSTOM_SCORE is None:  # hidden: no custom pruning runs
        return []
    from lib.prune.custom import check

    return check(run.prune)
