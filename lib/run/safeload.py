"""Reading a torch file without running code from it.

torch.load(weights_only=False) unpickles whatever the file names, so a crafted
checkpoint runs its payload (os.system, say) before any check of ours sees it.
Every read here is weights_only=True: tensors, plain containers and numbers,
and the few types allow-listed below, the only non-plain objects a checkpoint
of this project holds (numpy's RNG state, np.random.get_state(), is a tuple
with a uint32 array). A file that names anything else is refused with the
names it holds; TRUST_CHECKPOINT=1 in the environment (`make ...
TRUST_CHECKPOINT=1`) loads it the unsafe way, for a file the user trusts.
"""

from __future__ import annotations

import os
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import torch

TRUST_VAR = "TRUST_CHECKPOINT"


class UnsafeCheckpoint(Exception):
    """The file names Python objects outside the allow-list; nothing of it ran."""

    def __init__(self, path: Path, names: list[str]):
        self.path, self.names = path, names
        shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
        super().__init__(
            f"{path} was not loaded: besides tensors and plain data it names Python objects "
            f"({shown}), and unpickling those runs whatever code the file's author chose. "
            f"A checkpoint written by this project holds none of them, so this file comes "
            f"from another program, was made by hand, or was tampered with. If you trust it "
            f"(you know who wrote it and how), load it anyway with {TRUST_VAR}=1, e.g. `make "
            f"sample RUN=<dir> {TRUST_VAR}=1` or `{TRUST_VAR}=1 make continue`"
        )


def _allowed() -> list[Any]:
    """numpy's RNG state: an ndarray rebuilt by _reconstruct, with its dtype.
    numpy 1.x pickled _reconstruct as numpy.core.*, numpy 2 as numpy._core.*."""
    from numpy._core.multiarray import _reconstruct

    return [
        _reconstruct,
        (_reconstruct, "numpy.core.multiarray._reconstruct"),
        np.ndarray,
        np.dtype,
        type(np.dtype(np.uint32)),
    ]


def _allowed_names() -> set[str]:
    names = set()
    for entry in _allowed():
        if isinstance(entry, tuple):
            names.add(entry[1])
        else:
            names.add(f"{entry.__module__}.{entry.__qualname__}")
    return names


def trusted() -> bool:
    return os.environ.get(TRUST_VAR, "").strip().lower() in ("1", "y", "yes", "true")


def safe_load(
    path: Path | str, map_location: str | torch.device = "cpu", mmap: bool = False
) -> Any:
    """torch.load with weights_only=True and the allow-list; UnsafeCheckpoint when the
    file names other objects (unless TRUST_CHECKPOINT=1); torch's own error when it
    is damaged."""
    if trusted():
        return torch.load(path, map_location=map_location, weights_only=False, mmap=mmap)
    try:
        with torch.serialization.safe_globals(_allowed()):
            return torch.load(path, map_location=map_location, weights_only=True, mmap=mmap)
    except pickle.UnpicklingError:
        names = unsafe_names(path)
        if names:
            raise UnsafeCheckpoint(Path(path), names) from None
        raise


def unsafe_names(path: Path | str) -> list[str]:
    """The globals the file's pickle names beyond torch's defaults and our allow-list,
    read from the pickle's opcodes (nothing is executed); [] when unreadable."""
    try:
        names = torch.serialization.get_unsafe_globals_in_checkpoint(path)
    except Exception:  # damaged: not a zip, no data.pkl, a broken pickle stream
        return []
    allowed = _allowed_names()
    return [name for name in names if name not in allowed]
