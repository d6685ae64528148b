"""Memory and time estimates from a RunConfig: `make estimate`, automatic
batch fitting and the test matrix's dry run. It computes and never trains, so
the training loop can fit its batch with it; checking an estimate against a
measured peak is lib/bench/memory.py's.

Importing this package is cheap (no torch import until a function runs).
"""

from lib.estimate.memory import MemoryEstimate, estimate_memory
from lib.estimate.timing import estimate_seconds

__all__ = ["MemoryEstimate", "estimate_memory", "estimate_seconds"]
