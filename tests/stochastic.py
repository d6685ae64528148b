"""What a stochastic test observed, for measuring its margins.

A test marked `stochastic` passes each quantity it holds to a threshold through
observe() before asserting. Normally that does nothing; with TEST_OBSERVE set
to a file, each value is appended there as one JSON line (test, name, value,
seed, threads, CPU kernels), and scripts/stochastic_margins.py reads the lines of
many runs into the spread that docs/development.md asks to write beside the
assertion.
"""

from __future__ import annotations

import json
import os

import torch


def observe(name: str, value: float) -> float:
    """Record one observed quantity of the running test; returns it unchanged."""
    path = os.environ.get("TEST_OBSERVE")
    if path:
        row = {
            "test": os.environ.get("PYTEST_CURRENT_TEST", "?").rsplit(" ", 1)[0],
            "name": name,
            "value": float(value),
            "seed": int(os.environ.get("TEST_SEED", "0")),
            "threads": torch.get_num_threads(),
            "kernels": torch.backends.cpu.get_cpu_capability(),
        }
        with open(path, "a") as out:
            out.write(json.dumps(row) + "\n")
    return value
