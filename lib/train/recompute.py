"""Gradient checkpointing per block (TRAIN_GRADIENT_CHECKPOINTING).

Each of the model's blocks (LanguageModel.blocks(), lib/model/interface.py)
runs under torch.utils.checkpoint while training: its forward keeps only its
inputs, and the backward pass runs the block again to rebuild what it needs.
Activation memory falls from every block's saved tensors to one input per
block plus one block's tensors at a time, for about one more forward pass
of compute (a third more per step). The block's forward is replaced on the
instance, so parameter names, state dicts and checkpoints are unchanged.
Uses the non-reentrant implementation, which accepts any inputs and
outputs (HAMT's blocks return statistics dicts) and restores the RNG state,
so dropout draws the same masks when the block is recomputed.
"""

from __future__ import annotations

import functools
from typing import Any

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from lib.model.interface import LanguageModel


def _checkpointed(block: nn.Module, forward: Any, *args: Any, **kwargs: Any) -> Any:
    if block.training and torch.is_grad_enabled():
        return checkpoint(forward, *args, use_reentrant=False, **kwargs)
    return forward(*args, **kwargs)  # evaluation and generation run as usual


def enable_checkpointing(model: LanguageModel) -> int:
    """Checkpoint every block of model; returns how many were wrapped."""
    wrapped = 0
    for block in model.blocks():
        if getattr(block, "_checkpointed", False):
            continue
        block.forward = functools.partial(_checkpointed, block, block.forward)
        block._checkpointed = True
        wrapped += 1
    return wrapped
