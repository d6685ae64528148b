"""Rules across symbols that Kconfig cannot express, checked whenever a
configuration is loaded or written (lib/config.check_rules). Kept free of
torch so configuration commands stay fast."""
from __future__ import annotations

from typing import Any


def check_optimizer(run: Any) -> list[str]:
    """SPAM's warmup must fit between two resets."""
    if run.get("SPAM_ENABLE_RESET") and run.SPAM_WARMUP_STEPS >= run.SPAM_INTERVAL:
        return [f"CONFIG_SPAM_WARMUP_STEPS={run.SPAM_WARMUP_STEPS} must be below "
                f"CONFIG_SPAM_INTERVAL={run.SPAM_INTERVAL}: the update would never reach "
                f"full scale between resets"]
    return []


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
