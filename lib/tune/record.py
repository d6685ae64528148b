"""<matrix>/tune/<config>/tuning.json: a configuration's search, as the study holds it.

Rewritten atomically (lib/atomic.py) once per round of trials and when the
search ends: the stage (lib/tune/stage.py) asks the study for as many trials as
can train at once, waits for the whole round, tells the study how each ended,
then writes. `make watch`, `make results` and a reader of a search killed
mid-round therefore see every trial of the rounds before it; the round under
way shows in <config>/matrix.json, not here, and a search stopped by a signal
writes its round with the trials it interrupted as running:

  {"config", "storage", "study",
   "symbols": [{"name", "low", "high", "log", "best", "at_edge"}],
   "budget": {"trials", "steps_per_trial", "fraction_of_max_iters", "sampler",
              "pruner", "seed", "metric"},
   "trials": [{"number", "state": complete|pruned|fail|running, "value",
               "params", "steps", "run_dir"}],
   "best": {"value", "params", "trial"} or null}

A trial's value is its best reported validation loss, per token or per
character as the budget's metric says (null if it reported none); at_edge: the best value lies within 5 % of either end of its range
(lib/tune/space.py), a sign the range was too narrow.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from lib.atomic import read_json_object, write_json_atomic
from lib.run.record_model import TuningRecord, check

if TYPE_CHECKING:
    from lib.tune.budget import Budget
    from lib.tune.space import Dimension

FILE = "tuning.json"
STATES = {"COMPLETE": "complete", "PRUNED": "pruned", "FAIL": "fail"}


def _trial(t: Any, matrix_root: Path) -> dict[str, Any]:
    reported = list(t.intermediate_values.values())
    value = t.value if t.state.name == "COMPLETE" else min(reported, default=None)
    run_dir = t.user_attrs.get("run_dir")
    steps = None
    if run_dir:
        steps = read_json_object(matrix_root / run_dir / "metrics.json").get("iterations")
    if steps is None and t.intermediate_values:
        steps = max(t.intermediate_values)
    return {
        "number": t.number,
        "state": STATES.get(t.state.name, "running"),
        "value": value,
        "params": dict(t.params),
        "steps": steps,
        "run_dir": run_dir,
    }


def best_trial(study: Any) -> Any | None:
    """The complete trial with the lowest value, if any finished."""
    done = [t for t in study.get_trials(deepcopy=False) if t.state.name == "COMPLETE"]
    return min(done, key=lambda t: t.value) if done else None


def build(
    study: Any,
    config_id: str,
    url: str,
    dims: list[Dimension],
    budget: Budget,
    trials: int,
    matrix_root: Path,
) -> dict[str, Any]:
    best = best_trial(study)
    symbols = []
    for d in dims:
        value = best.params.get(d.name) if best is not None else None
        at_edge = value is not None and d.at_edge(value)
        symbols.append({**d.record(), "best": value, "at_edge": at_edge})
    return {
        "config": config_id,
        "storage": url,
        "study": study.study_name,
        "symbols": symbols,
        "budget": {**budget.record(), "trials": trials},
        "trials": [_trial(t, matrix_root) for t in study.get_trials(deepcopy=False)],
        "best": (
            {"value": best.value, "params": dict(best.params), "trial": best.number}
            if best is not None
            else None
        ),
    }


def write(path: Path, record: dict[str, Any]) -> None:
    """Write tuning.json once it matches its model (lib/run/record_model.py's
    TuningRecord): a wrong field raises RecordError naming it, nothing written."""
    check(TuningRecord, path, record)
    write_json_atomic(path, record)
