"""Reading a torch file without running code from it.

torch.load(weights_only=False) unpickles whatever the file names, so a crafted
checkpoint runs its payload (os.system, say) before any check of ours sees it.
Every read here is weights_only=True: tensors, plain containers and numbers,
and the few types allow-listed below, the only non-plain objects a checkpoint
of this project holds (numpy's RNG state, np.random.get_state(), is a tuple
with a uint32 array). A file that names anything else is refused with the
names it holds, whichever format it has (torch's zip, or the legacy run of
pickles torch wrote before 1.6): the names are read from the pickle's opcodes,
nothing is unpickled. TRUST_CHECKPOINT=1 in the environment (`make ...
TRUST_CHECKPOINT=1`) loads it the unsafe way, for a file the user trusts.
Torch's own advice to load with weights_only=False is never passed on.
"""

from __future__ import annotations

import os
import pickle
import pickletools
import re
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # torch and numpy load on first use: `make` dry runs and errors stay fast
    import torch

TRUST_VAR = "TRUST_CHECKPOINT"
# A legacy torch file: pickles of the magic number, the protocol, sys info, the
# object and its storages' keys, then the storages' raw bytes (not a pickle).
LEGACY_PICKLES = 5
_STRING_OPS = {
    "STRING", "BINSTRING", "SHORT_BINSTRING", "UNICODE", "BINUNICODE",
    "SHORT_BINUNICODE", "BINUNICODE8",
}  # fmt: skip
_MEMO_OPS = {"PUT", "BINPUT", "LONG_BINPUT", "MEMOIZE"}  # they leave the stack as it is
_GET_OPS = {"GET", "BINGET", "LONG_BINGET"}


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
    import numpy as np
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
    is damaged, less any advice to load it unsafely."""
    import torch

    if trusted():
        return torch.load(path, map_location=map_location, weights_only=False, mmap=mmap)
    try:
        with torch.serialization.safe_globals(_allowed()):
            return torch.load(path, map_location=map_location, weights_only=True, mmap=mmap)
    except pickle.UnpicklingError as err:
        names = unsafe_names(path)
        if names:
            raise UnsafeCheckpoint(Path(path), names) from None
        raise pickle.UnpicklingError(_without_advice(err)) from None


def _without_advice(err: Exception) -> str:
    """Torch's refusal less its advice (retry with weights_only=False, or allow-list
    the global: either runs whatever the file holds): the unpickler's own reason."""
    text = str(err)
    m = re.search(
        r"WeightsUnpickler error:\s*(.*?)\s*(?:Please |Check the documentation|$)", text, re.S
    )
    reason = " ".join(m.group(1).split()) if m else ""
    if reason or "weights_only" in text:
        return "a weights-only read of its pickle stream stopped" + (
            f": {reason}" if reason else ""
        )
    return text


def unsafe_names(path: Path | str) -> list[str]:
    """The globals the file's pickle names beyond torch's defaults and our allow-list,
    read from the pickle's opcodes (nothing is executed), in the order they appear;
    [] when there are none or nothing can be read."""
    try:
        names = _zip_globals(path) if zipfile.is_zipfile(path) else _legacy_globals(path)
    except Exception:  # damaged: no data.pkl, a broken zip, an unreadable file
        return []
    from torch import _weights_only_unpickler as unpickler  # torch's own allow-list

    allowed = {
        *unpickler._get_allowed_globals(),
        *unpickler._get_user_allowed_globals(),
        *_allowed_names(),
    }
    return list(dict.fromkeys(name for name in names if name not in allowed))


def _zip_globals(path: Path | str) -> list[str]:
    """The globals of a zip checkpoint's <archive>/data.pkl."""
    with zipfile.ZipFile(path) as archive:
        data = [n for n in archive.namelist() if n.count("/") == 1 and n.endswith("/data.pkl")]
        if not data:
            return []
        names: list[str] = []
        with archive.open(data[0]) as stream:
            _pickle_globals(stream, names)
        return names


def _legacy_globals(path: Path | str) -> list[str]:
    """The globals of a legacy (non-zip) torch file's pickles; the raw storage bytes
    after them, or a damaged stream, end the scan with what was found so far."""
    names: list[str] = []
    with open(path, "rb") as f:
        for _ in range(LEGACY_PICKLES):
            try:
                _pickle_globals(f, names)
            except Exception:  # not a pickle (any more): the storages' bytes, or damage
                break
    return names


def _pickle_globals(stream: Any, names: list[str]) -> None:
    """Append the "module.name" of every global one pickle stream names, up to its
    STOP (those before a damaged opcode too).

    GLOBAL carries its name; STACK_GLOBAL (protocol 4 and up) takes the two
    strings on top of the stack, pushed directly or fetched from the memo, so
    those are tracked; an opcode that pushes anything else pushes None."""
    pushed: list[str | None] = []
    memo: dict[Any, str | None] = {}
    for op, arg, _ in pickletools.genops(stream):
        if op.name == "GLOBAL":
            names.append(str(arg).replace(" ", ".", 1))
        elif op.name == "STACK_GLOBAL":
            module, name = pushed[-2:] if len(pushed) >= 2 else (None, None)
            names.append(f"{module}.{name}" if module and name else "<a global named at load time>")
            pushed.append(None)
        elif op.name in _STRING_OPS:
            pushed.append(arg if isinstance(arg, str) else None)
        elif op.name in _MEMO_OPS:
            memo[len(memo) if op.name == "MEMOIZE" else arg] = pushed[-1] if pushed else None
        elif op.name in _GET_OPS:
            pushed.append(memo.get(arg))
        elif op.name not in ("PROTO", "FRAME", "STOP"):
            pushed.append(None)
