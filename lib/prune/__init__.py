"""Weight pruning during training: magnitude, movement and Adam-state (AdamWPrune) scores.

Pruner(model.prunable(), method=..., ...) is driven by the trainer through
before_step / after_step; see pruner.py for the protocol. Import from the
modules (lib.prune.pruner, ...): this package is read on every configuration
check (lib/prune/rules.py) and stays free of torch.
"""
