"""RunConfig -> Pruner: the PRUNING_* and ADAMWPRUNE_* symbols."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from lib.config.run_config import value_or
from lib.prune.pruner import Pruner

if TYPE_CHECKING:
    from lib.config.run_config import RunConfig


def build_pruner(
    run: RunConfig, model: torch.nn.Module, optimizer: torch.optim.Optimizer
) -> Pruner | None:
    if run.PRUNING_MODE == "none":
        return None
    method, target = run.PRUNING_METHOD, run.PRUNING_TARGET_SPARSITY
    warmup, ramp_end, frequency = run.PRUNING_WARMUP, run.PRUNING_RAMP_END, run.PRUNING_FREQUENCY
    schedule, scope = run.PRUNING_SCHEDULE, run.PRUNING_SCOPE
    # all visible unless PRUNING_MODE_NONE; method and target also need PRUNING_MODE_SINGLE,
    # which every run has (the matrix expands PRUNING_MODE_MULTIPLE into runs)
    assert (
        method is not None
        and target is not None
        and warmup is not None
        and ramp_end is not None
        and frequency is not None
        and schedule is not None
        and scope is not None
    ), "PRUNING_MODE_MULTIPLE is a matrix, not a run"
    budget = "rank" if run.ADAMWPRUNE_BITTER4_RANK_BUDGET else "depth"
    params = model.prunable()
    if run.PRUNING_HEAD:  # the head last, as AdamWPrune's module order puts it (bitter4's depth)
        params.append(("lm_head.weight", model.lm_head.weight))
    return Pruner(
        params,
        method=method,
        target=target,
        warmup=warmup,
        ramp_end=ramp_end,
        frequency=frequency,
        schedule=schedule,
        scope=scope,
        optimizer=optimizer,
        variant=value_or(run.ADAMWPRUNE_VARIANT, "bitter7"),
        bitter4_budget=budget,
        seed=run.TRAIN_SEED,
        movement_score="knlp" if run.PRUNING_MOVEMENT_KNLP else "accumulated",
    )
