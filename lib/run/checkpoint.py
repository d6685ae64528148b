"""Checkpoints: atomic save, validated load, and the RNGs' seed and state for exact resume.

A checkpoint holds everything a resumed run needs to continue as if it had
never stopped: model, optimizer, gradient scaler, the step (which fixes the LR
schedule), best validation loss, metric history, the batch samplers'
generator states and the global RNG states (dropout). It is written to a temp
file and renamed (lib/atomic.py), so a kill mid-save or a full disk leaves the
previous checkpoint intact; a full disk is one paragraph (DiskFullError): the
bytes the checkpoint needs, the bytes free, which checkpoint is intact, what to
do. It is read without running code from it (lib/run/safeload.py).
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # torch and numpy load on first use: `make` dry runs and errors stay fast
    import torch

from lib.atomic import DiskFullError, read_json_object, shortfall, write_atomic
from lib.run.safeload import UnsafeCheckpoint, safe_load

FORMAT = 1
REQUIRED = ("format", "step", "model", "optimizer", "model_config", "family")
# Each checkpoint a run keeps, and the one to fall back on when it is damaged.
OTHER = {"ckpt_best.pt": "ckpt_latest.pt", "ckpt_latest.pt": "ckpt_best.pt"}


class CheckpointError(Exception):
    pass


def save_checkpoint(path: Path, state: dict[str, Any]) -> None:
    import torch

    state = {"format": FORMAT, **state}
    try:
        write_atomic(path, lambda f: torch.save(state, f))
    except DiskFullError as err:
        raise DiskFullError(
            err.errno, disk_full_message(Path(path), state, err), str(path)
        ) from None


def load_checkpoint(path: Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """Load and check a checkpoint; any problem is one clear CheckpointError."""
    path = Path(path)
    if not path.parent.is_dir():
        raise CheckpointError(f"there is no run at {path.parent}: no such folder")
    if not path.is_file():
        raise CheckpointError(_missing(path))
    try:
        state = safe_load(path, map_location)
    except UnsafeCheckpoint as err:
        raise CheckpointError(str(err)) from None
    except Exception as err:  # truncated, not a torch file, a broken pickle stream...
        raise CheckpointError(
            f"{path} is not a readable checkpoint ({type(err).__name__}: "
            f"{_first_line(err)}); {fallback(path)}"
        ) from None
    missing = [k for k in REQUIRED if k not in state] if isinstance(state, dict) else REQUIRED
    if missing:
        raise CheckpointError(
            f"{path} is missing {', '.join(missing)}: not a kconfig-llm "
            f"checkpoint, or from an incompatible version"
        )
    if state["format"] != FORMAT:
        raise CheckpointError(
            f"{path} has checkpoint format {state['format']}; this version reads format {FORMAT}"
        )
    return state


def _missing(path: Path) -> str:
    """Why the run at path.parent has no such checkpoint (its metrics.json says
    whether it saves any: SAVE_CHECKPOINT)."""
    saves = read_json_object(path.parent / "metrics.json").get("checkpoints") or {}
    if saves.get("save") is False:
        return (
            f"no checkpoint at {path}: {path.parent.name} was trained with SAVE_CHECKPOINT "
            f"off, so it saved none and has no weights to sample, evaluate, export or "
            f"resume; train it again with SAVE_CHECKPOINT=y for those"
        )
    return (
        f"no checkpoint at {path}: the run has not saved one yet (checkpoints are written "
        f"at evaluations or every CHECKPOINT_INTERVAL steps, and on stop)"
    )


def _first_line(err: Exception) -> str:
    return (str(err).strip().splitlines() or [""])[0]


def intact_step(path: Path) -> int | None:
    """The step of the checkpoint at path when it reads as one (memory-mapped: the
    tensors are not read), else None."""
    try:
        state = safe_load(path, mmap=True)
    except Exception:
        return None
    if not isinstance(state, dict) or any(k not in state for k in REQUIRED):
        return None
    step = state["step"]
    return step if isinstance(step, int) else None


def fallback(path: Path) -> str:
    """What to use instead of the damaged checkpoint at path: the run's other
    checkpoint when it is intact, else what remains to do."""
    other_name = OTHER.get(path.name)
    if other_name is None:
        return "no other checkpoint is known for it"
    other = path.with_name(other_name)
    step = intact_step(other) if other.is_file() else None
    if step is not None:
        if other_name == "ckpt_latest.pt":
            return (
                f"{other_name} (step {step}) is intact: `CHECKPOINT=latest` reads it "
                f"(make sample, eval, export, lm-eval)"
            )
        return (
            f"{other_name} (step {step}) is intact: make sample, eval and export read it "
            f"(CHECKPOINT=best, their default); to resume training from it, copy it over "
            f"{path.name} and run `make continue`"
        )
    state = "is damaged too" if other.is_file() else "does not exist"
    if path.name == "ckpt_latest.pt":
        return (
            f"{other_name} {state}, so nothing can be resumed: delete {path} and `make "
            f"continue` trains the run again from step 0"
        )
    return f"{other_name} {state}: the run has no readable weights; train it again"


def disk_full_message(path: Path, state: dict[str, Any], err: DiskFullError) -> str:
    """One paragraph: what the checkpoint needs, what is free, what is intact, what to do."""
    room, todo = shortfall(err, "the checkpoint", serialized_size(state))
    where = f"no space left on device for {path}{err.cause}"
    return f"{where}: {room}. {intact_summary(path)}. {todo}{_resume_hint(path)}."


def intact_summary(path: Path) -> str:
    """Which of the folder's checkpoints are intact (the failed write changed none)."""
    parts = []
    for name in ("ckpt_latest.pt", "ckpt_best.pt"):
        other = path.with_name(name)
        if other.is_file():
            step = intact_step(other)
            parts.append(
                f"{name} (step {step}) is intact"
                if step is not None
                else f"{name} exists but does not read as a checkpoint"
            )
    if not parts:
        return "No checkpoint exists yet: a resumed run starts again from step 0"
    return "Unchanged by the failed write: " + ", ".join(parts)


def _resume_hint(path: Path) -> str:
    if not (path.parent / "config.txt").is_file():  # not a run folder
        return ""
    from lib.run.rundir import resume_command

    return f"; then `{resume_command(path.parent)}` resumes the run"


class _Counter:
    """A write target that keeps only the count of bytes written."""

    def __init__(self) -> None:
        self.size = 0

    def write(self, data: bytes) -> int:
        self.size += len(data)
        return len(data)

    def flush(self) -> None:
        pass


def serialized_size(state: dict[str, Any]) -> int:
    """Bytes torch.save writes for state (serialised again, to nowhere)."""
    import torch

    counter = _Counter()
    torch.save(state, counter)  # any object with write() and flush() will do
    return counter.size


def seed_everything(seed: int) -> None:
    """Seed the global RNGs rng_state() saves (torch's seeds every CUDA device too)."""
    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def rng_state() -> dict[str, Any]:
    import numpy as np
    import torch

    state = {
        "torch": torch.get_rng_state(),
        "python": random.getstate(),
        "numpy": np.random.get_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    import numpy as np
    import torch

    torch.set_rng_state(state["torch"])
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def restore_rng(checkpoint: dict[str, Any], rank: int, world_size: int) -> None:
    """This rank's RNG state from a checkpoint: its own when saved by as many ranks
    ("rng_ranks"), else rank 0's ("rng")."""
    ranks = checkpoint.get("rng_ranks") or []
    set_rng_state(ranks[rank] if len(ranks) == world_size else checkpoint["rng"])
