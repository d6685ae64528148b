"""Early stopping: end a run whose validation loss has stopped improving.

An evaluation improves when its loss is below the best so far by more than
TRAIN_EARLY_STOP_MIN_DELTA; after TRAIN_EARLY_STOP_PATIENCE evaluations in a
row without improvement, update() returns the reason to stop. The counter is
part of the checkpoint, so a resumed run continues the count.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lib.config.symbols import Train


@dataclass
class EarlyStop:
    patience: int = 0  # 0: off
    min_delta: float = 0.0
    best: float = math.inf
    bad_evals: int = 0
    reason: str | None = None  # set by the evaluation that ends the run

    @classmethod
    def from_settings(cls, s: Train) -> EarlyStop:
        # both hidden without TRAIN_EARLY_STOP, and then patience 0: off
        return cls(s.TRAIN_EARLY_STOP_PATIENCE, s.TRAIN_EARLY_STOP_MIN_DELTA)

    def update(self, val_loss: float) -> str | None:
        """Count one evaluation; the reason to stop, or None to go on."""
        self.reason = None
        if not self.patience:
            return None
        if val_loss < self.best - self.min_delta:
            self.best, self.bad_evals = val_loss, 0
            return None
        self.bad_evals += 1
        if self.bad_evals >= self.patience:
            self.reason = (
                f"early stop: validation loss has not improved by more than "
                f"{self.min_delta:g} on {self.best:.4f} for {self.bad_evals} "
                f"evaluations (TRAIN_EARLY_STOP_PATIENCE={self.patience})"
            )
        return self.reason

    def state_dict(self) -> dict[str, Any]:
        return asdict(self)

    def load_state_dict(self, state: dict[str, Any] | None) -> None:
        """Restore the count; the patience and margin stay those configured now."""
        if state:
            self.best, self.bad_evals = state["best"], state["bad_evals"]
