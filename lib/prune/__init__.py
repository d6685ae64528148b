"""Weight pruning during training: magnitude, movement and Adam-state (AdamWPrune) scores.

Pruner(model.prunable(), method=..., ...) is driven by the trainer through
before_step / after_step; see pruner.py for the protocol.
"""
from lib.prune.pruner import METHODS, SCOPES, Pruner
from lib.prune.schedule import sparsity_at
from lib.prune.scores import VARIANTS
from lib.prune.threshold import dkw_bound, kth_threshold

__all__ = ["METHODS", "SCOPES", "Pruner", "VARIANTS", "dkw_bound", "kth_threshold", "sparsity_at"]
