"""What an evaluation cost: tokens scored per second and peak memory, and the
machine they were measured on, for eval.json's "measured" section.

The same figures for our runs and for baselines (`make eval`, `make
eval-baseline`), so a results table can set them side by side; they compare
only between records of the same machine (its GPU, else its CPU). On a GPU
the peak is the memory torch allocated (torch.cuda.max_memory_allocated, reset
when the evaluation starts); on a CPU it is the process's peak resident size,
which also counts Python, the libraries and the evaluation sets.
"""

from __future__ import annotations

import sys
from typing import Any

import torch

from lib.run.environment import cpu_name


def start(device: torch.device) -> None:
    """Reset the GPU's peak so that the reading covers this evaluation only."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)


def peak_memory_mb(device: torch.device) -> tuple[float | None, str]:
    """(peak in MiB, what was measured); None where nothing can be read."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        return torch.cuda.max_memory_allocated(device) / 2**20, "cuda max allocated"
    try:
        import resource
    except ImportError:  # Windows
        return None, "unmeasured"
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / (2**20 if sys.platform == "darwin" else 2**10), "process peak RSS"


def machine(device: torch.device) -> str:
    """The hardware the figures belong to: the GPU's name, else the CPU's."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return cpu_name()


def measured(entries: dict[str, Any], device: torch.device) -> dict[str, Any]:
    """eval.json's "measured": over the perplexity sets, tokens scored per second
    of their wall time; the peak memory; the machine."""
    sets = [e for e in entries.values() if e.get("kind") == "perplexity" and e.get("seconds")]
    tokens = sum(e["tokens"] for e in sets)
    seconds = sum(e["seconds"] for e in sets)
    peak, kind = peak_memory_mb(device)
    return {
        "tokens_per_sec": round(tokens / seconds, 1) if seconds > 0 else None,
        "tokens": tokens,
        "peak_memory_mb": round(peak, 1) if peak is not None else None,
        "memory": kind,
        "machine": machine(device),
    }
