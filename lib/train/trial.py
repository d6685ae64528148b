"""A tuning trial's side of its study: report each validation loss, stop when pruned.

The tuning stage (lib/tune/stage.py) starts a trial as an ordinary run whose
folder holds trial.json: the study's database URL and name, the trial's id
and the pruner. At each evaluation the run reports its validation loss to
that study (Optuna's RDB storage, shared by every trial process) and asks the
pruner whether to go on; a pruned run stops there like an early stop, with
"pruned" in its metrics.json, and the stage records the trial as pruned. A
run without trial.json never imports optuna.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

FILE = "trial.json"


def build_pruner(name: str, min_resource: int, max_resource: int) -> Any:
    """Optuna's pruner for MATRIX_TUNE_PRUNER, its resource in training steps:
    the first rung is the first evaluation; halving (factor 2) suits the few
    evaluations a short trial makes."""
    import optuna

    if name == "successive_halving":
        return optuna.pruners.SuccessiveHalvingPruner(min_resource=min_resource, reduction_factor=2)
    if name == "hyperband":
        return optuna.pruners.HyperbandPruner(
            min_resource=min_resource, max_resource=max_resource, reduction_factor=2
        )
    return optuna.pruners.NopPruner()


def storage(url: str) -> Any:
    """Optuna's RDB storage for url; SQLite waits up to a minute for a lock,
    since parallel trials write to one file."""
    import optuna

    kwargs = {"connect_args": {"timeout": 60}} if url.startswith("sqlite") else {}
    return optuna.storages.RDBStorage(url, engine_kwargs=kwargs)


class TrialReport:
    """Reports to the study when the run is a trial; otherwise does nothing."""

    def __init__(self, spec: dict[str, Any] | None = None, is_main: bool = True):
        self.spec, self.is_main = spec, is_main
        self.pruned_at: int | None = None
        self._trial: Any = None

    @classmethod
    def from_run_dir(cls, run_dir: Path, is_main: bool) -> TrialReport:
        """Every rank knows the run is a trial; rank 0 alone talks to the study."""
        path = Path(run_dir) / FILE
        return cls(json.loads(path.read_text()), is_main) if path.is_file() else cls()

    @property
    def active(self) -> bool:
        return self.spec is not None

    @property
    def pruned(self) -> bool:
        return self.pruned_at is not None

    def _open(self) -> Any:
        if self._trial is None:
            import optuna

            optuna.logging.set_verbosity(logging.WARNING)
            s = self.spec or {}
            pruner = build_pruner(s["pruner"], s["min_resource"], s["max_resource"])
            study = optuna.load_study(
                study_name=s["study"], storage=storage(s["storage"]), pruner=pruner
            )
            self._trial = optuna.trial.Trial(study, s["trial_id"])
        return self._trial

    def report(self, step: int, val_loss: float, per_char: float) -> str | None:
        """Report one evaluation (step 0, before training, is not one): the study's
        metric, the validation loss per token or per character (spec "metric"); the
        reason to stop when the pruner prunes the trial before its last step, else None."""
        if self.spec is None or not self.is_main or step == 0:
            return None
        trial = self._open()
        per_char_metric = self.spec.get("metric") == "val_loss_per_char"
        trial.report(per_char if per_char_metric else val_loss, step)
        if step >= self.spec["max_resource"] or not trial.should_prune():
            return None  # the last evaluation ends the trial anyway: it is complete
        self.pruned_at = step
        return (
            f"pruned by the tuning study's {self.spec['pruner']} pruner at step {step} "
            f"(val loss {val_loss:.4f}); trial {self.spec.get('number')}"
        )

    def record(self) -> dict[str, Any]:
        """metrics.json's fields: whether (and where) the study pruned this run."""
        if self.spec is None:
            return {}
        return {"pruned": self.pruned, "pruned_at": self.pruned_at}
