"""Real tiny training runs: AdamWPrune dense (its base optimizer, no pruner) and
knlp's movement rule (PRUNING_MOVEMENT_KNLP) through the trainer."""

from __future__ import annotations

import pytest
import torch

from lib.train.naming import create_run_dir, run_tag
from lib.train.trainer import Trainer


def _train(cfg):
    trainer = Trainer(cfg, create_run_dir(cfg), log=lambda _: None)
    return trainer, trainer.train()


@pytest.mark.slow
def test_adamwprune_dense_trains_its_base_adamw_without_a_pruner(tiny_run):
    cfg = tiny_run(
        RUN_NAME="dense",
        OPTIMIZER_ADAMWPRUNE="y",
        PRUNING_MODE_NONE="y",
        WEIGHT_DECAY="0",
        GPT2_MAX_ITERS=20,
    )
    assert run_tag(cfg) == "gpt2_adamwprune_none"
    trainer, summary = _train(cfg)
    assert summary["status"] == "completed" and summary["iterations"] == 20
    assert trainer.training.pruner is None
    optimizer = trainer.training.optimizer
    assert type(optimizer) is torch.optim.AdamW
    assert {g["weight_decay"] for g in optimizer.param_groups} == {0.0}
    assert all(bool((p != 0).any()) for _, p in trainer.training.model.prunable())  # nothing masked


@pytest.mark.slow
def test_knlp_movement_rule_trains_and_reaches_its_target(tiny_run):
    cfg = tiny_run(
        RUN_NAME="movement",
        OPTIMIZER_ADAMW="y",
        PRUNING_MODE_SINGLE="y",
        PRUNING_METHOD_MOVEMENT="y",
        PRUNING_MOVEMENT_KNLP="y",
        PRUNING_SCHEDULE_LINEAR="y",
        PRUNING_TARGET_SPARSITY="0.5",
        PRUNING_WARMUP=4,
        PRUNING_RAMP_END=16,
        PRUNING_FREQUENCY=1,
        GPT2_MAX_ITERS=24,
    )
    trainer, summary = _train(cfg)
    assert summary["status"] == "completed"
    pruner = trainer.training.pruner
    assert pruner is not None and pruner.reselect and pruner.initial is not None
    # ties at the threshold can prune a few more than the target, never fewer
    assert 0.5 <= pruner.report()["sparsity"] < 0.52
    for p, mask in zip(pruner.params, pruner.masks):
        assert bool((p[~mask] == 0).all())
