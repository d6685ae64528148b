"""Whether `make continue` has anything to do for a single run.

A completed run is left as it is: resuming it would replay the start-up, add a
"resumed" event and overwrite its record (peak memory, speed) with figures of
a process that trained nothing. Only a larger MAX_ITERS than the run was
planned with extends it. A run trained with SAVE_CHECKPOINT off has nothing
to resume from: `make continue` refuses it rather than train it again from
step 0 over its record (a test matrix does restart such runs: they are its).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from lib.atomic import read_json_object

# metrics.json's status of a run that did not complete, as the refusal words it.
ENDED = {
    "running": "was cut off",
    "stopped": "was stopped",
    "failed": "failed",
    "diverged": "diverged",
}


def already_completed(run_dir: Path, args: Sequence[str]) -> str | None:
    """The message saying run_dir is done, or None when it is to be trained: not
    completed, or completed and args (its overrides) raise MAX_ITERS past its plan."""
    record = read_json_object(run_dir / "metrics.json")
    if record.get("status") != "completed":
        return None
    from lib.config.run_config import load_run_config
    from lib.run.rundir import resume_command

    steps = int(record.get("iterations") or 0)
    planned = int(record.get("max_iters") or steps)
    asked = load_run_config(list(args), path=run_dir / "config.txt").GPT2_MAX_ITERS
    if asked > max(steps, planned):
        return None
    early = (
        f", stopped early: {record['reason']}"
        if record.get("stopped_early") and record.get("reason")
        else ""
    )
    best = record.get("best_val_loss")
    loss = f", best val loss {best:.4f}" if isinstance(best, (int, float)) else ""
    return (
        f"{run_dir.name} already completed ({steps} of {planned} steps{early}{loss}); "
        f"nothing was changed. To train it further, raise MAX_ITERS past {planned}: "
        f"`{resume_command(run_dir)} MAX_ITERS=<more than {planned}>`"
    )


def not_resumable(run_dir: Path, args: Sequence[str]) -> str | None:
    """The refusal for a run trained with SAVE_CHECKPOINT off (it has no
    ckpt_latest.pt), None when it can be resumed or restarted as before."""
    if (run_dir / "ckpt_latest.pt").exists():
        return None
    from lib.config.run_config import load_run_config

    if load_run_config(list(args), path=run_dir / "config.txt").SAVE_CHECKPOINT:
        return None
    record = read_json_object(run_dir / "metrics.json")
    status = record.get("status")
    # A failure records the step it came at; the series may end at an earlier evaluation.
    step = record.get("failed_at_step", record.get("iterations")) or 0
    got = f" (it {ENDED.get(status, status)} after step {step})" if status else ""
    return (
        f"{run_dir.name} was trained with checkpoints off (CONFIG_SAVE_CHECKPOINT is not "
        f"set), so it has no checkpoint to resume from{got}; nothing was changed. To train "
        f"the same configuration again from step 0 as a new run: `cp {run_dir}/config.txt "
        f'.config && make SET="SAVE_CHECKPOINT=y"` (give it another RUN_NAME if it has '
        f"one); with checkpoints on it can then be resumed"
    )
