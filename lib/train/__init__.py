"""The training loop every model family runs: the stack's one assembly (build.py,
also used by `make bench` and `make estimate`), the trainer, one optimizer step
(TrainStep, which owns compile state), the evaluator, the step log, the
first-steps fallbacks it applies (compile off, smaller micro-batch), activation
recompute, the LR schedule and early stopping. Options: the "Training" and
"Memory" menus (Kconfig here).
"""
