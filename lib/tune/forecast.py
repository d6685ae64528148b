"""What the dry run says about a tuning stage: the budget, the trials, and how
long they take at most (each configuration's trial estimated by lib/estimate,
times its trials; pruned trials stop sooner, so the real time is shorter)."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lib.config.run_config import load_run_config
from lib.plural import counted
from lib.tune import space
from lib.tune.budget import Budget
from lib.tune.stage import plan, trial_args
from lib.tune.study import trial_count

if TYPE_CHECKING:
    from lib.config.run_config import RunConfig
    from lib.estimate.calibrate import Measured
    from lib.jobs import PlannedRun


def trial_config(base: RunConfig, overrides: list[str], base_path: Path) -> tuple[RunConfig, int]:
    """A configuration's trial at its configured values (the budget's steps), and
    how many trials its study runs (0: none of MATRIX_TUNE_SYMBOLS applies to it).
    The dry run and `make watch` (lib/matrix/eta.py) estimate trials by it."""
    budget = Budget.from_run(base)
    run = load_run_config(trial_args(base, overrides, budget), base_path)
    dims = space.parse(base.MATRIX_TUNE_SYMBOLS or "", run.values, True, budget.steps)
    return run, trial_count(budget, dims) if dims else 0


def lines(
    base: RunConfig, planned: list[PlannedRun], completed: list[Measured], info: Any = None
) -> tuple[list[str], float | None]:
    """(the lines to print, the stage's estimated seconds or None if unknown)."""
    from lib.estimate.calibrate import estimate_run

    budget = Budget.from_run(base)
    configs = plan(planned)["configs"]
    total_s: float | None = 0.0
    trials = 0
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "base.config"
        path.write_text(base.config_text)
        for cfg in configs.values():
            run, count = trial_config(base, cfg["overrides"], path)
            trials += count
            estimate = estimate_run(run, completed, info)
            if total_s is not None:
                total_s = None if estimate is None else total_s + estimate.seconds * count
    symbols = base.MATRIX_TUNE_SYMBOLS or ""
    head = (
        f"tuning first (MATRIX_TUNE): {counted(len(configs), 'configuration')} x "
        f"{counted(budget.trials, 'trial')} of {budget.steps} steps "
        f"({budget.fraction:.0%} of GPT2_MAX_ITERS) over {symbols}: {counted(trials, 'trial run')}, "
        f"sampler {budget.sampler}, pruner {budget.pruner.replace('_', ' ')}, seed {budget.seed}"
    )
    when = (
        "time unknown (no estimate for a trial)"
        if total_s is None
        else f"at most about {total_s / 60:.1f} min one after another (pruned trials stop sooner)"
    )
    note = budget.eval_note(base.GPT2_EVAL_INTERVAL)
    return [
        head,
        *([f"  {note}"] if note else []),
        f"  {when}; then each configuration's runs at its best values",
    ], total_s
