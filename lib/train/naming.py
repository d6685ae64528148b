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
    NAME_MAX,
    RunDirError,
    claim_run,
    is_name,
    latest_in_the_way,
    point_latest,
    results_root,
    resume_command,
    unusable_results_dir,
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
            name = run.RUN_NAME
            too_long = len(name.encode()) > NAME_MAX
            shown = name if len(name) <= 60 else f"{name[:40]}...{name[-10:]}"
            size = f" ({len(name.encode())} bytes)" if too_long else ""
            advice = "choose a shorter RUN_NAME" if too_long else "choose another RUN_NAME"
            raise RunDirError(
                f'CONFIG_RUN_NAME="{shown}"{size}: allowed letters, '
                f"digits, '.', '_' and '-', starting with a letter or digit, at most "
                f"{NAME_MAX} of them (a folder name's limit); {advice}"
            )
        return run.RUN_NAME
    return f"{run_tag(run)}_{time.strftime('%Y%m%d-%H%M%S', time.localtime(now))}"


def create_run_dir(run: RunConfig) -> Path:
    """A new run's folder, owned by this process; an existing one is never
    reused without RESUME=1. A named run (RUN_NAME) gets that name or an error; a
    timestamped one whose name is taken (two runs started in the same second) gets
    the first free <id>-2, <id>-3, ..."""
    base = results_root(run.run) / run_id(run)
    refused = latest_in_the_way(base.parent)  # before anything is made
    if refused:
        raise RunDirError(refused)
    if run.RUN_NAME:
        return _open_new(base, run)
    for n in range(1, 100):
        try:
            return _open_new(base if n == 1 else base.with_name(f"{base.name}-{n}"), run)
        except _Taken:
            continue
    return _open_new(base.with_name(f"{base.name}-100"), run)


class _Taken(RunDirError):
    """The folder holds a run, or another live process is starting one there."""


def _open_new(path: Path, run: RunConfig) -> Path:
    """path as a new run's folder, claimed by this process; _Taken when taken,
    RunDirError when the results folder cannot hold it."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        took = claim_run(path)  # first: two `make RUN_NAME=x` at once cannot both pass
    except RunDirError as err:
        raise _Taken(str(err)) from None
    except OSError as err:  # a file, /proc, a read-only or full disk: one paragraph
        raise RunDirError(unusable_results_dir(run.RESULTS_DIR, path, "run folder", err)) from None
    if any(p.name != owner.LOCK for p in path.iterdir()):
        if took:
            owner.release(path)
        raise _Taken(
            f"{path} already holds a run: resume it with "
            f"`{resume_command(path)}`, or choose another RUN_NAME"
        )
    write_text_atomic(path / "config.txt", run.config_text)
    point_latest(path)
    return path
