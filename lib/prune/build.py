"""RunConfig -> Pruner: the PRUNING_* and ADAMWPRUNE_* symbols."""
from __future__ import annotations

from typing import Any

import torch

from lib.prune import Pruner


def build_pruner(run: Any, model: torch.nn.Module,
                 optimizer: torch.optim.Optimizer) -> Pruner | None:
    if run.PRUNING_MODE == "none":
        return None
    budget = "rank" if run.get("ADAMWPRUNE_BITTER4_RANK_BUDGET") else "depth"
    return Pruner(model.prunable(), method=run.PRUNING_METHOD, target=run.PRUNING_TARGET_SPARSITY,
                  warmup=run.PRUNING_WARMUP, ramp_end=run.PRUNING_RAMP_END,
                  frequency=run.PRUNING_FREQUENCY, schedule=run.PRUNING_SCHEDULE,
                  scope=run.PRUNING_SCOPE, optimizer=optimizer,
                  variant=run.get("ADAMWPRUNE_VARIANT", "bitter7"), bitter4_budget=budget,
                  seed=run.TRAIN_SEED)
