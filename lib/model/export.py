"""`make export`: a trained run -> its family's export format.

The family's registry record names its exporter: GPT-2 with vanilla
attention as a transformers GPT2LMHeadModel folder; GPT-2 with any other
attention (MLA, RA, RA+MLA, gated RA, output gate) and HAMT as folders that
carry their model code (lib/model/remote/, loaded with
trust_remote_code=True); each with a model card (gpt2/export.py,
hamt/export.py). A family without an exporter is refused by name. The
default output folder is <run>/hf/.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path

from lib.model import registry
from lib.run.checkpoint import CheckpointError, load_checkpoint


def export_run(
    run_dir: Path | str,
    checkpoint: str = "best",
    out_dir: Path | str | None = None,
    log: Callable[[str], None] = print,
) -> Path:
    """Write the run's ckpt_<checkpoint>.pt in its family's export format; returns the folder."""
    run_dir = Path(run_dir).resolve()
    state = load_checkpoint(run_dir / f"ckpt_{checkpoint}.pt")
    family = registry.family(state["family"])
    if family.export is None:
        able = " and ".join(f.label for f in registry.families() if f.export is not None)
        raise CheckpointError(
            f"{run_dir.name} is a {family.name} run; only {able} runs have an export format"
        )
    out = Path(out_dir) if out_dir else run_dir / "hf"
    before = _files(out)
    family.export(state, run_dir, checkpoint, out, log)
    _apply_umask(out, before)
    log(f"exported {run_dir.name} (step {state['step']}, {checkpoint} checkpoint) to {out}")
    return out


def _files(folder: Path) -> dict[Path, int]:
    """Each file under folder and its change time (ns)."""
    if not folder.is_dir():
        return {}
    return {p: p.stat().st_mtime_ns for p in folder.rglob("*") if p.is_file()}


def _apply_umask(folder: Path, before: dict[Path, int]) -> None:
    """Give the files this export wrote the user's umask: safetensors (and with it
    transformers' save_pretrained) writes through a private temporary and keeps
    its mode 0600, so a group sharing the folder could not read the weights."""
    mask = os.umask(0)
    os.umask(mask)
    for path, changed in _files(folder).items():
        if before.get(path) != changed:
            os.chmod(path, stat.S_IMODE(0o666 & ~mask))
