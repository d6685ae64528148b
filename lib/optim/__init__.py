"""Optimizers, chosen by the OPTIMIZER choice: build_optimizer(run, model, device)."""
from __future__ import annotations

from typing import Any

import torch


def build_optimizer(run: Any, model: torch.nn.Module, device: torch.device) -> torch.optim.Optimizer:
    """AdamW over the model's decay/no-decay groups (weight decay on matrices only)."""
    if run.OPTIMIZER != "adamw":
        raise ValueError(f"optimizer '{run.OPTIMIZER}' has no implementation")
    groups = model.param_groups(run.WEIGHT_DECAY)
    return torch.optim.AdamW(groups, lr=run.LEARNING_RATE,
                             betas=(run.ADAMW_BETA1, run.ADAMW_BETA2), eps=run.ADAMW_EPS,
                             fused=device.type == "cuda")


def state_bytes(optimizer: torch.optim.Optimizer) -> int:
    """Bytes held in optimizer state tensors (moments, masks...)."""
    return sum(t.numel() * t.element_size() for s in optimizer.state.values()
               for t in s.values() if torch.is_tensor(t))
