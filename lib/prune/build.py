"""The Prune section -> Pruner: the PRUNING_* and ADAMWPRUNE_* symbols."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from lib.prune.custom import load_score
from lib.prune.pruner import Pruner
from lib.prune.registry import CUSTOM

if TYPE_CHECKING:
    from lib.config.symbols import Prune


def build_pruner(
    s: Prune, model: torch.nn.Module, optimizer: torch.optim.Optimizer, seed: int
) -> Pruner | None:
    """The run's pruner over the model's block matrices (and the head with
    PRUNING_HEAD), or None without pruning; `seed` (TRAIN_SEED) draws the
    score samples its thresholds are estimated from."""
    if s.PRUNING_MODE == "none":
        return None
    # the matrix expands PRUNING_MODE_MULTIPLE into runs of one method each
    assert s.PRUNING_METHOD is not None, "PRUNING_MODE_MULTIPLE is a matrix, not a run"
    params = model.prunable()
    if s.PRUNING_HEAD:  # the head last, as AdamWPrune's module order puts it (bitter4's depth)
        params.append(("lm_head.weight", model.lm_head.weight))
    return Pruner(
        params,
        method=s.PRUNING_METHOD,
        target=s.PRUNING_TARGET_SPARSITY,
        warmup=s.PRUNING_WARMUP,
        ramp_end=s.PRUNING_RAMP_END,
        frequency=s.PRUNING_FREQUENCY,
        schedule=s.PRUNING_SCHEDULE,
        scope=s.PRUNING_SCOPE,
        optimizer=optimizer,
        variant=s.ADAMWPRUNE_VARIANT,
        bitter4_budget="rank" if s.ADAMWPRUNE_BITTER4_RANK_BUDGET else "depth",
        seed=seed,
        movement_score="knlp" if s.PRUNING_MOVEMENT_KNLP else "accumulated",
        score=load_score(s.PRUNING_CUSTOM_SCORE) if s.PRUNING_METHOD == CUSTOM else None,
    )
