"""What a run records about its batch and its optimizer in metrics.json,
beside the loop's own figures (lib/run/metrics.py holds the file format)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from lib.estimate import estimate_memory
from lib.optim import optimizer_stats, state_bytes

if TYPE_CHECKING:
    from lib.config.run_config import RunConfig
    from lib.estimate.fit import BatchPlan


def batch_record(
    run: RunConfig, vocab_size: int, plan: BatchPlan, device_info: Any, log: Callable[[str], None]
) -> dict[str, Any]:
    """The batch that runs, with `make estimate`'s figure for it (to compare
    with peak_memory_mb)."""
    estimate_mb = None
    try:
        estimate_mb = (
            estimate_memory(
                run, vocab_size, plan.batch_size, plan.accumulation, device_info
            ).total_bytes
            / 2**20
        )
    except Exception as err:  # an estimate must never stop a run
        log(f"memory estimate unavailable: {type(err).__name__}: {err}")
    return {
        "micro_batch_size": plan.batch_size,
        "gradient_accumulation": plan.accumulation,
        "memory_estimate_mb": estimate_mb,
    }


def optimizer_summary(
    run: RunConfig, optimizer: torch.optim.Optimizer, pruner: Any
) -> dict[str, Any]:
    """Optimizer and pruning figures: state memory (the AdamWPrune claim is
    that pruning adds only a boolean mask), sparsity, SPAM counters."""
    optimizer_bytes = state_bytes(optimizer)
    pruner_bytes = pruner.state_bytes() if pruner is not None else 0
    out: dict[str, Any] = {
        "optimizer_state_bytes": optimizer_bytes + pruner_bytes,
        "optimizer_state_breakdown": {"optimizer": optimizer_bytes, "pruning": pruner_bytes},
        **{f"spam_{k}": v for k, v in optimizer_stats(optimizer).items()},
    }
    if pruner is not None:
        report = pruner.report()
        out.update(
            pruning_method=run.PRUNING_METHOD,
            pruning_variant=run.ADAMWPRUNE_VARIANT,
            sparsity=report["sparsity"],
            sparsity_target=run.PRUNING_TARGET_SPARSITY,
            sparsity_per_layer=report["per_layer"],
        )
    return out
