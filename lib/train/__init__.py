"""The training loop every model family runs: the trainer, one optimizer step
(TrainStep, which owns compile state), the first-steps fallbacks it applies
(compile off, smaller micro-batch), activation recompute, the LR schedule and
early stopping. Options: the "Training" and "Memory" menus (Kconfig here).
"""
