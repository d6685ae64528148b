"""One trial seen from the stage: the trial.json that ties its run to the study
(read by the run's lib/train/trial.py), and what the study is told when the
run ends, from the run's own records (matrix.json entry, metrics.json)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from lib.atomic import read_json_object, write_json_atomic
from lib.train.trial import FILE

if TYPE_CHECKING:
    from lib.tune.budget import Budget


def state(name: str) -> Any:
    """optuna's TrialState by name (optuna is imported only where a study runs)."""
    import optuna

    return optuna.trial.TrialState[name]


def write_spec(run_dir: Path, url: str, study: Any, trial: Any, budget: Budget) -> None:
    """What the run needs to report to its study and build the same pruner."""
    write_json_atomic(
        Path(run_dir) / FILE,
        {
            "storage": url,
            "study": study.study_name,
            "trial_id": trial._trial_id,
            "number": trial.number,
            "pruner": budget.pruner,
            "min_resource": budget.eval_interval,
            "max_resource": budget.steps,
            "metric": budget.metric,
        },
    )


def _report_reused(study: Any, trial: Any, metrics: dict[str, Any], metric: str) -> None:
    """A reused run reported nothing to this study: report its recorded evaluations."""
    frozen = [t for t in study.get_trials(deepcopy=False) if t.number == trial.number]
    if frozen and not frozen[0].intermediate_values:
        series = metrics.get(metric) or {}
        for step, value in zip(series.get("iters", []), series.get("values", [])):
            if step:
                trial.report(value, step)


def tell(
    study: Any, trial: Any, run_dir: Path, entry: dict[str, Any], metric: str = "val_loss"
) -> str:
    """Tell the study how the trial's run ended, its best `metric` (val_loss or
    val_loss_per_char); the outcome: complete, pruned, fail, diverged, or
    interrupted (nothing told: the trial stays running)."""
    metrics = read_json_object(Path(run_dir) / "metrics.json")
    _report_reused(study, trial, metrics, metric)
    if entry["state"] == "completed" or metrics.get("status") == "completed":
        if metrics.get("pruned"):
            study.tell(trial, state=state("PRUNED"))
            return "pruned"
        if metrics.get(f"best_{metric}") is not None:
            study.tell(trial, metrics[f"best_{metric}"])
            return "complete"
        study.tell(trial, state=state("FAIL"))
        return "fail"
    if entry["state"] == "failed":
        study.tell(trial, state=state("FAIL"))
        return "fail"
    if entry["state"] == "diverged":  # these values diverge: not retried with new ones
        trial.set_user_attr("final_failure", True)
        study.tell(trial, state=state("FAIL"))
        return "diverged"
    return "interrupted"
