"""A study's budget, the same for every configuration of a matrix: trials,
steps per trial, sampler, pruner, seed and the metric minimised, from the
MATRIX_TUNE_* symbols."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lib.plural import counted, with_article

if TYPE_CHECKING:
    from lib.config.run_config import RunConfig


@dataclass(frozen=True)
class Budget:
    trials: int
    steps: int  # per trial
    fraction: float  # of GPT2_MAX_ITERS
    sampler: str  # tpe | grid
    pruner: str  # successive_halving | hyperband | none
    seed: int
    eval_interval: int  # the steps between a trial's reports
    metric: str = "val_loss"  # or val_loss_per_char: what trials report and are ranked by

    @classmethod
    def from_run(cls, run: RunConfig) -> Budget:
        percent = run.MATRIX_TUNE_FRACTION or 20
        steps = max(1, run.GPT2_MAX_ITERS * percent // 100)
        return cls(
            trials=run.MATRIX_TUNE_TRIALS or 8,
            steps=steps,
            fraction=percent / 100,
            sampler=run.MATRIX_TUNE_SAMPLER or "tpe",
            pruner=run.MATRIX_TUNE_PRUNER or "successive_halving",
            seed=run.MATRIX_TUNE_SEED or 0,
            eval_interval=trial_eval_interval(steps, run.GPT2_EVAL_INTERVAL),
            metric=run.MATRIX_TUNE_METRIC or "val_loss",
        )

    def eval_note(self, configured: int) -> str:
        """What the dry run says when trials evaluate more often than the run."""
        if self.eval_interval == configured:
            return ""
        return (
            f"trials evaluate every {counted(self.eval_interval, 'step')} "
            f"(GPT2_EVAL_INTERVAL={configured} "
            f"would give {with_article(f'{self.steps}-step')} trial fewer than two "
            f"evaluations to compare)"
        )

    def record(self) -> dict[str, Any]:
        """tuning.json's "budget"."""
        return {
            "trials": self.trials,
            "steps_per_trial": self.steps,
            "fraction_of_max_iters": self.fraction,
            "sampler": self.sampler,
            "pruner": self.pruner,
            "seed": self.seed,
            "metric": self.metric,
        }


def trial_eval_interval(steps: int, configured: int) -> int:
    """The steps between a trial's evaluations: the run's own when a trial
    reaches two evaluations with it, else a quarter of the trial (four reports
    for the pruner to compare), so that a short trial is still judged."""
    if steps >= 2 * configured:
        return configured
    return max(1, steps // 4)
