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
    """The configured optimizer; betas, epsilon and weight decay are shared by the Adam family."""
    base = base_optimizer(run)
    adam = dict(lr=run.LEARNING_RATE, betas=(run.ADAM_BETA1, run.ADAM_BETA2), eps=run.ADAM_EPSILON)
    groups = model.param_groups(run.WEIGHT_DECAY)
    if base == "adamw":
        return torch.optim.AdamW(groups, **adam, fused=device.type == "cuda")
    if base == "adamwspam":
        return AdamWSPAM(groups, **adam, theta=run.get("SPAM_THETA", 5000.0),
                         clip=run.SPAM_ENABLE_CLIP, reset=run.SPAM_ENABLE_RESET,
                         interval=run.get("SPAM_INTERVAL", 0),
                         warmup_steps=run.get("SPAM_WARMUP_STEPS", 0),
                         clip_skip_steps=run.get("SPAM_CLIP_SKIP_STEPS", 0),
                         spare_unseen=run.get("SPAM_CLIP_SPARE_UNSEEN", False),
                         restart_bias_correction=run.get("SPAM_RESTART_BIAS_CORRECTION", False))
    raise ValueError(f"optimizer '{base}' has no implementation")


def optimizer_stats(optimizer: torch.optim.Optimizer) -> dict[str, int]:
    """Counters an optimizer keeps (SPAM: spikes clipped, resets), else {}."""
    stats = getattr(optimizer, "stats", None)
    return stats() if callable(stats) else {}


def state_bytes(optimizer: torch.optim.Optimizer) -> int:
    """Bytes held in optimizer state tensors (moments, step counters)."""
    return sum(t.numel() * t.element_size() for s in optimizer.state.values()
               if isinstance(s, dict) for t in s.values() if torch.is_tensor(t))
