"""Running many training runs: each run a process of scripts/train.py, several
at once and packed onto the GPUs (runner.py, packing.py) or submitted as Slurm
jobs (slurm.py), their states in matrix.json (state.py), earlier identical runs
linked instead of retrained (reuse.py) and the outputs a run must have beyond
training (outputs.py). `make test-matrix` (lib/matrix/) and a tuning stage's
trials (lib/tune/) both run their runs here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from lib.config.run_config import RunConfig

Overrides = list[tuple[str, str]]


@dataclass(frozen=True)
class PlannedRun:
    """One run of the matrix: its id, overrides on the base config, its config."""

    run_id: str
    overrides: Overrides
    config: RunConfig

    @property
    def args(self) -> list[str]:
        return [f"{k}={v}" for k, v in self.overrides]
