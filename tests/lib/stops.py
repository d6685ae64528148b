"""Stopping a training run in a test the way a user's stop does: a real
SIGTERM, delivered while optimizer step `step` runs. The trainer honours it at
the next step boundary (lib/run/signals.py), so it stops after exactly `step`
steps with a checkpoint, as `timeout` or a scheduler would make it."""

from __future__ import annotations

import os
import signal

from lib.run.signals import STOP


def train_until(trainer, step: int | None):
    """trainer.train(), stopped by SIGTERM after `step` steps (None: not stopped);
    the process's stop request is cleared afterwards, so the next run starts afresh."""
    if step is None:
        return trainer.train()
    sent = []

    def after_optimizer_step(*_):
        # The trainer counts the step once it returns: inside it, trainer.step is step - 1.
        if trainer.step + 1 == step and not sent:
            sent.append(step)
            os.kill(os.getpid(), signal.SIGTERM)  # the handler runs before the next line

    handle = trainer.training.optimizer.register_step_post_hook(after_optimizer_step)
    try:
        summary = trainer.train()
    finally:
        handle.remove()
        STOP.signal = None
    assert sent and summary["stop_signal"] == "SIGTERM", "the stop was not delivered"
    return summary
