"""When a run writes its checkpoints: SAVE_CHECKPOINT and CHECKPOINT_INTERVAL.

The trainer asks; the checkpointer answers, and writes. ckpt_latest.pt (the resume
point) is due every CHECKPOINT_INTERVAL steps (0: at every evaluation), at
the last step, and when the run stops at a step boundary; ckpt_best.pt at
every evaluation that improves the validation loss. With SAVE_CHECKPOINT off
nothing is ever written, and a stopped run has nothing to resume from.
The file format is lib/run/checkpoint.py's.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lib.run.checkpoint import save_checkpoint
from lib.run.rundir import resume_command

if TYPE_CHECKING:
    from lib.config.symbols import Run, Train

OFF_NOTE = "SAVE_CHECKPOINT is off"


@dataclass
class Checkpointer:
    enabled: bool
    interval: int  # steps between ckpt_latest.pt writes
    total: int  # the run's last step: always saved

    @classmethod
    def from_run(cls, r: Run, t: Train) -> Checkpointer:
        interval = r.CHECKPOINT_INTERVAL if r.SAVE_CHECKPOINT else 0
        return cls(r.SAVE_CHECKPOINT, interval or t.GPT2_EVAL_INTERVAL, t.GPT2_MAX_ITERS)

    def latest_due(self, step: int) -> bool:
        """Whether ckpt_latest.pt is to be written after `step` in the loop."""
        return self.enabled and step > 0 and (step % self.interval == 0 or step == self.total)

    def best_due(self, improved: bool) -> bool:
        return self.enabled and improved

    def due(self, step: int, improved: bool) -> list[str]:
        """The files to write after `step`, in order. Best first: ckpt_latest.pt and
        metrics.json record the new best, so a kill between the writes must leave
        ckpt_best.pt ahead of the record, never behind."""
        return (["ckpt_best.pt"] if self.best_due(improved) else []) + (
            ["ckpt_latest.pt"] if self.latest_due(step) else []
        )

    @staticmethod
    def write(path: Path, state: dict[str, Any]) -> None:
        save_checkpoint(path, state)  # atomic (lib/run/checkpoint.py)

    def due_at_stop(self, step: int) -> bool:
        """Whether a run stopping after `step` (not diverged) still has to write its
        resume point: the loop wrote it after that step when it was due, and a run
        stopped before its first new step resumed from one written there."""
        return self.enabled and not self.latest_due(step)

    def stop_note(self, run_dir: Path) -> str:
        """How a run stopped at a step boundary goes on, for its stop reason."""
        if self.enabled:
            return f"with a checkpoint; `{resume_command(run_dir)}` resumes it"
        return f"without a checkpoint ({OFF_NOTE}): it cannot be resumed"

    def record(self) -> dict[str, Any]:
        """metrics.json's "checkpoints": what the run saves and how often."""
        return {"save": self.enabled, "interval": self.interval if self.enabled else None}
