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

from pathlib import Path
from typing import Callable

from lib.model import registry
from lib.run.checkpoint import CheckpointError, load_checkpoint


def export_run(run_dir: Path | str, checkpoint: str = "best", out_dir: Path | str | None = None,
               log: Callable[[str], None] = print) -> Path:
    """Write the run's ckpt_<checkpoint>.pt in its family's export format; returns the folder."""
    run_dir = Path(run_dir).resolve()
    state = load_checkpoint(run_dir / f"ckpt_{checkpoint}.pt")
    family = registry.family(state["family"])
    if family.export is None:
        able = " and ".join(f.label for f in registry.families() if f.export is not None)
        raise CheckpointError(f"{run_dir.name} is a {family.name} run; only {able} runs "
                              f"have an export format")
    out = Path(out_dir) if out_dir else run_dir / "hf"
    family.export(state, run_dir, checkpoint, out, log)
    log(f"exported {run_dir.name} (step {state['step']}, {checkpoint} checkpoint) to {out}")
    return out
