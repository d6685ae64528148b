"""`make estimate`'s pruning buffers against what the real pruner allocates: the
block matrices' masks and, with PRUNING_HEAD, the LM head's (once when tied)."""

from __future__ import annotations

import pytest
import torch

from lib.config.run_config import run_config_from_defaults
from lib.estimate import estimate_memory
from lib.estimate.memory import model_counts, pruning_bytes
from lib.model import registry
from lib.optim import build_optimizer
from lib.prune.build import build_pruner

TINY = dict(
    GPT2_N_LAYER=2, GPT2_N_HEAD=2, GPT2_N_EMBD=32, GPT2_BLOCK_SIZE=32, BATCH_SIZE=2, DEVICE_CPU="y"
)
PRUNED = dict(PRUNING_MODE_SINGLE="y", PRUNING_TARGET_SPARSITY="0.5")
VOCAB = 100


def pruner_and_estimate(**settings):
    run = run_config_from_defaults({k: str(v) for k, v in {**TINY, **PRUNED, **settings}.items()})
    cfg, counts = model_counts(run, VOCAB)
    model = registry.family(run.MODEL).build(cfg)
    optimizer = build_optimizer(run.optim, run.LEARNING_RATE, model, torch.device("cpu"))
    pruner = build_pruner(run.prune, model, optimizer, run.TRAIN_SEED)
    assert pruner is not None
    return run, model, pruner, pruning_bytes(run, counts)


@pytest.mark.parametrize(
    "settings",
    [
        dict(PRUNING_METHOD_MAGNITUDE="y"),
        dict(PRUNING_METHOD_MAGNITUDE="y", GPT2_TIE_HEAD="n"),
        dict(PRUNING_METHOD_MOVEMENT="y"),
        dict(PRUNING_METHOD_MOVEMENT="y", PRUNING_MOVEMENT_KNLP="y"),
    ],
    ids=["magnitude", "magnitude-untied", "movement", "movement-knlp"],
)
def test_pruning_bytes_are_what_the_pruner_allocates_with_and_without_the_head(settings):
    _, _, blocks, block_estimate = pruner_and_estimate(**settings)
    run, model, both, both_estimate = pruner_and_estimate(**settings, PRUNING_HEAD="y")
    assert block_estimate == blocks.state_bytes()
    assert both_estimate == both.state_bytes()
    head = model.lm_head.weight
    assert "lm_head.weight" in both.names and head.numel() == VOCAB * 32
    # the head adds one mask of its own shape (plus its score or w0), tied or not
    per_weight = 5 if run.PRUNING_METHOD == "movement" else 1
    assert both_estimate - block_estimate == head.numel() * per_weight
    mask = both.masks[both.names.index("lm_head.weight")]
    assert mask.dtype == torch.bool and mask.shape == head.shape


def test_the_head_mask_reaches_the_estimate_total():
    settings = dict(PRUNING_METHOD_MAGNITUDE="y")
    run, _, blocks, _ = pruner_and_estimate(**settings)
    head_run, _, both, _ = pruner_and_estimate(**settings, PRUNING_HEAD="y")
    without, with_head = estimate_memory(run, VOCAB), estimate_memory(head_run, VOCAB)
    grown = both.state_bytes() - blocks.state_bytes()
    assert with_head.optimizer - without.optimizer == grown > 0
    assert with_head.total_bytes - without.total_bytes == grown
