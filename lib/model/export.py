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

import contextlib
import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterator
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
    if out_dir:  # the user's folder, anywhere: written in place
        out = Path(out_dir)
        before = _files(out)
        family.export(state, run_dir, checkpoint, out, log)
        _apply_umask(out, before)
    else:
        out = run_dir / "hf"
        with _run_folder_hf(out) as stage:
            family.export(state, run_dir, checkpoint, stage, log)
            _apply_umask(stage, {})
    log(f"exported {run_dir.name} (step {state['step']}, {checkpoint} checkpoint) to {out}")
    return out


@contextlib.contextmanager
def _run_folder_hf(out: Path) -> Iterator[Path]:
    """A private folder beside <run>/hf to export into; on leaving the block its
    files are moved into hf/ (os.replace, with hf/ opened without following a
    link). In a run folder a group shares anyone may put a link there, as hf/
    or as a file in it, and an export through it would write wherever it leads."""
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        raise CheckpointError(_not_ours(out))
    out.mkdir(exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=".hf-", dir=out.parent))
    try:
        yield stage
        try:
            folder = os.open(out, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except OSError:  # made a link or a file while the export ran
            raise CheckpointError(_not_ours(out)) from None
        try:
            for entry in os.scandir(stage):
                os.replace(entry.path, entry.name, dst_dir_fd=folder)
            os.fsync(folder)  # the renames reach the disk
        finally:
            os.close(folder)
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def _not_ours(out: Path) -> str:
    kind = "a symbolic link" if out.is_symlink() else "a file"
    return (
        f"{out} is {kind}, not a folder of the run's own: "
        f"`make export` writes <run>/hf/ only as a real folder, so that a link in a "
        f"shared run folder cannot lead the export elsewhere. Nothing was exported there; "
        f"remove or rename it, or export to a folder you name with EXPORT_DIR=<dir>"
    )


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
