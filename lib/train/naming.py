"""Run ids in the field's naming (model, optimizer, AdamWPrune variant, the
family's attention variant, pruning) and the new run's folder under them.
Above the model families, since the id names the family's variant; the
folder itself (claiming, config snapshot, `latest`) is lib/run/rundir.py's.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

from lib.atomic import write_text_atomic
from lib.model import registry
from lib.run import owner
from lib.run.rundir import (
    RunDirError,
    claim_run,
    is_name,
    point_latest,
    results_root,
    resume_command,
)

if TYPE_CHECKING:
    from lib.config.run_config import RunConfig


def run_tag(run: RunConfig) -> str:
    """The field's naming: model, optimizer, AdamWPrune variant, attention variant
    when not vanilla, pruning method and sparsity in percent, e.g.
    gpt2_adamwspam_magnitude_50, gpt2_adamwprune_bitter7_state_50, gpt2_adamw_none
    (gpt2_adamwprune_none: AdamWPrune's base optimizer, dense).
    One run's tag: the matrix expands the MULTIPLE modes before naming runs."""
    assert run.OPTIMIZER is not None, "OPTIMIZER_MODE_MULTIPLE is a matrix, not a run"
    parts: list[str] = [run.MODEL, run.OPTIMIZER]
    if run.OPTIMIZER == "adamwprune" and run.PRUNING_MODE != "none":
        # one method is then PRUNING_METHOD_STATE; dense, AdamWPrune is gpt2_adamwprune_none
        assert run.ADAMWPRUNE_VARIANT is not None, "AdamWPrune without PRUNING_METHOD_STATE"
        rank = "rank" if run.ADAMWPRUNE_BITTER4_RANK_BUDGET else ""  # ours, not the depth ramp
        parts.append(run.ADAMWPRUNE_VARIANT + rank)
    variant = registry.family(run.MODEL).variant(run)
    if variant not in ("vanilla", run.MODEL):  # HAMT is its own variant: "hamt_adamw_none"
        parts.append(variant)
    if run.PRUNING_MODE == "none":
        parts.append("none")
    else:
        method, sparsity = run.PRUNING_METHOD, run.PRUNING_TARGET_SPARSITY
        assert method is not None and sparsity is not None, "PRUNING_MODE_MULTIPLE is a matrix"
        parts += [method, f"{round(100 * sparsity):d}"]
    return "_".join(parts)


def run_id(run: RunConfig, now: float | None = None) -> str:
    """RUN_NAME, or the run tag plus a timestamp."""
    if run.RUN_NAME:
        if not is_name(run.RUN_NAME):  # fullmatch: a trailing newline is refused too
            raise RunDirError(
                f'CONFIG_RUN_NAME="{run.RUN_NAME}": allowed letters, digits, '
                f"'.', '_' and '-', starting with a letter or digit"
            )
        return run.RUN_NAME
    return f"{run_tag(run)}_{time.strftime('%Y%m%d-%H%M%S', time.localtime(now))}"


def create_run_dir(run: RunConfig) -> Path:
    """A new run's folder, owned by this process; an existing one is never
    reused without RESUME=1."""
    path = results_root(run) / run_id(run)
    path.mkdir(parents=True, exist_ok=True)
    took = claim_run(path)  # first: two `make RUN_NAME=x` at once cannot both pass the check
    if any(p.name != owner.LOCK for p in path.iterdir()):
        if took:
            owner.release(path)
        raise RunDirError(
            f"{path} already holds a run: resume it with "
            f"`{resume_command(path)}`, or choose another RUN_NAME"
        )
    write_text_atomic(path / "config.txt", run.config_text)
    point_latest(path)
    return path
