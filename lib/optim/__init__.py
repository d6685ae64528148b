"""Optimizers, chosen by the OPTIMIZER choice: build_optimizer(run, model, device).

AdamWPrune is its base optimizer (AdamW or AdamWSPAM) plus the state-based
pruner of lib/prune, which reads that optimizer's moments: the optimizer
itself is unchanged, which is the point of the method.
"""
from __future__ import annotations

from typing import Any

import torch

from lib.optim.spam import AdamWSPAM


def base_optimizer(run: Any) -> str:
    """"adamw" or "adamwspam": what actually updates the weights."""
    return run.ADAMWPRUNE_BASE if run.OPTIMIZER == "adamwprune" else run.OPTIMIZER


def build_optimizer(run: Any, model: torch.nn.Module, device: torch.device) -> torch.optim.Optimizer:
    base = base_optimizer(run)
    if base == "adamw":
        return torch.optim.AdamW(model.param_groups(run.WEIGHT_DECAY), lr=run.LEARNING_RATE,
                                 betas=(run.ADAMW_BETA1, run.ADAMW_BETA2), eps=run.ADAMW_EPS,
                                 fused=device.type == "cuda")
    if base == "adamwspam":
        return AdamWSPAM(model.param_groups(run.SPAM_WEIGHT_DECAY), lr=run.LEARNING_RATE,
                         betas=(run.SPAM_BETA1, run.SPAM_BETA2), eps=run.SPAM_EPS,
                         theta=run.get("SPAM_THETA", 5000.0), clip=run.SPAM_ENABLE_CLIP,
                         reset=run.SPAM_ENABLE_RESET, interval=run.get("SPAM_INTERVAL", 0),
                         warmup_steps=run.get("SPAM_WARMUP_STEPS", 0))
    raise ValueError(f"optimizer '{base}' has no implementation")


def optimizer_stats(optimizer: torch.optim.Optimizer) -> dict[str, int]:
    """Counters an optimizer keeps (SPAM: spikes clipped, resets), else {}."""
    stats = getattr(optimizer, "stats", None)
    return stats() if callable(stats) else {}


def state_bytes(optimizer: torch.optim.Optimizer) -> int:
    """Bytes held in optimizer state tensors (moments, step counters)."""
    return sum(t.numel() * t.element_size() for s in optimizer.state.values()
               if isinstance(s, dict) for t in s.values() if torch.is_tensor(t))
