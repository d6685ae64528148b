"""One Optuna study per configuration, in a database every trial process shares.

The database is MATRIX_TUNE_STORAGE, or sqlite:///<matrix>/tune/study.db;
studies are created with load_if_exists, so a killed search continues where it
stopped. The sampler is TPE (seeded, its random start-up shortened to half
the trials, since budgets here are small) or a grid over each range; the
pruner is built by lib/train/trial.py, where the trial processes build it too.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lib.train.trial import build_pruner, storage
from lib.tune.space import Dimension, grid_points

if TYPE_CHECKING:
    from lib.tune.budget import Budget

DB = "study.db"


def storage_url(configured: str, tune_dir: Path) -> str:
    """The configured URL, else the SQLite file beside the matrix."""
    return configured.strip() or f"sqlite:///{Path(tune_dir).resolve() / DB}"


def study_name(config_id: str, configured: str, matrix_id: str) -> str:
    """The configuration's id; in a shared database (a URL given), prefixed by the
    matrix, so that another matrix's study of the same configuration is not continued."""
    return f"{matrix_id}:{config_id}" if configured.strip() else config_id


def build_sampler(budget: Budget, dims: list[Dimension]) -> Any:
    import optuna

    if budget.sampler == "grid":
        return _grid_class()(grid_points(dims, budget.trials), seed=budget.seed)
    startup = max(1, min(10, budget.trials // 2))
    return optuna.samplers.TPESampler(seed=budget.seed, n_startup_trials=startup)


def _grid_class() -> Any:
    import optuna

    class Grid(optuna.samplers.GridSampler):
        """Optuna's grid, without its study.stop() once the grid is done: that works
        inside study.optimize() only, and the stage counts its trials itself."""

        def after_trial(self, study: Any, trial: Any, state: Any, values: Any) -> None:
            return None

    return Grid


def open_study(name: str, url: str, budget: Budget, dims: list[Dimension]) -> Any:
    """Create the study, or load it when it exists (a resumed search)."""
    import optuna

    optuna.logging.set_verbosity(logging.WARNING)
    return optuna.create_study(
        storage=storage(url),
        sampler=build_sampler(budget, dims),
        pruner=build_pruner(budget.pruner, budget.eval_interval, budget.steps),
        study_name=name,
        direction="minimize",
        load_if_exists=True,
    )


def trial_count(budget: Budget, dims: list[Dimension]) -> int:
    """Trials the study runs: the budget, or the grid's size when smaller."""
    if budget.sampler != "grid":
        return budget.trials
    size = 1
    for values in grid_points(dims, budget.trials).values():
        size *= len(values)
    return size
