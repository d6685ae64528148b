"""The training loop every model family runs: the stack's one assembly (build.py,
also what lib/bench measures), the trainer, one optimizer step (TrainStep, which
owns compile state), the evaluator, the step log, the first-steps fallbacks it
applies (compile off, smaller micro-batch), activation recompute, the LR
schedule, early stopping, and the analyses other packages register to run on
the model (hooks.py). Options: the "Training" and "Memory" menus (Kconfig here).
"""
