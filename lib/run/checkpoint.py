"""Checkpoints: atomic save, validated load, and the RNGs' seed and state for exact resume.

A checkpoint holds everything a resumed run needs to continue as if it had
never stopped: model, optimizer, gradient scaler, the step (which fixes the LR
schedule), best validation loss, metric history, the batch samplers'
generator states and the global RNG states (dropout). It is written to a temp
file and renamed (lib/run/atomic.py), so a kill mid-save or a full disk leaves the
previous checkpoint intact; a full disk is a DiskFullError naming the file and
the free bytes, not torch's "unexpected pos".
"""
from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np
import torch

from lib.run.atomic import write_atomic

FORMAT = 1
REQUIRED = ("format", "step", "model", "optimizer", "model_config", "family")


class CheckpointError(Exception):
    pass


def save_checkpoint(path: Path, state: dict[str, Any]) -> None:
    state = {"format": FORMAT, **state}
    write_atomic(path, lambda f: torch.save(state, f))


def load_checkpoint(path: Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """Load and check a checkpoint; any problem is one clear CheckpointError."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"no checkpoint at {path}: the run has not saved one yet "
                              f"(checkpoints are written at each evaluation and on stop)")
    try:
        state = torch.load(path, map_location=map_location, weights_only=False)
    except Exception as err:  # truncated, not a torch file, unpickling error...
        raise CheckpointError(f"{path} is not a readable checkpoint ({type(err).__name__}: "
                              f"{err}); the run's other checkpoint (ckpt_best.pt or "
                              f"ckpt_latest.pt) may still be good") from None
    missing = [k for k in REQUIRED if k not in state] if isinstance(state, dict) else REQUIRED
    if missing:
        raise CheckpointError(f"{path} is missing {', '.join(missing)}: not a kconfig-llm "
                              f"checkpoint, or from an incompatible version")
    if state["format"] != FORMAT:
        raise CheckpointError(f"{path} has checkpoint format {state['format']}; this version "
                              f"reads format {FORMAT}")
    return state


def seed_everything(seed: int) -> None:
    """Seed the global RNGs rng_state() saves (torch's seeds every CUDA device too)."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def rng_state() -> dict[str, Any]:
    state = {"torch": torch.get_rng_state(), "python": random.getstate(),
             "numpy": np.random.get_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
