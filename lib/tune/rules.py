"""MATRIX_TUNE's rules: the symbols to tune exist, are numeric and have sound
ranges (lib/tune/space.py), and each trial has the two steps it needs for two
evaluations (trials evaluate more often than the run when needed: lib/tune/budget.py),
so that the pruner has something to compare. That at least one symbol applies to some
configuration is checked on the whole plan (lib/tune/stage.check)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lib.config.kconfig import ConfigError
from lib.config.rules import rule
from lib.tune import space
from lib.tune.budget import Budget

if TYPE_CHECKING:
    from lib.config.run_config import RunConfig


@rule
def tuning_budget(run: RunConfig) -> list[str]:
    if not run.MATRIX_TUNE:
        return []
    problems = []
    budget = Budget.from_run(run)
    try:  # a symbol hidden here is left out (MUON_LR in a matrix's AdamW runs)
        space.parse(run.MATRIX_TUNE_SYMBOLS or "", run.values, True, budget.steps)
    except ConfigError as err:
        problems += err.problems
    if budget.steps < 2:  # trials evaluate more often than the run (Budget), down to every step
        percent = -(-200 // run.GPT2_MAX_ITERS)  # two steps, in percent rounded up
        configured = run.MATRIX_TUNE_FRACTION or 20
        fix = (
            f"raise it to {percent} (TUNE_FRACTION={percent})"
            if percent <= 100
            else f"train longer: MAX_ITERS={-(-200 // configured)} or more"
        )
        problems.append(
            f"CONFIG_MATRIX_TUNE_FRACTION={run.MATRIX_TUNE_FRACTION} gives each trial "
            f"{budget.steps} of CONFIG_GPT2_MAX_ITERS={run.GPT2_MAX_ITERS} steps, too few for "
            f"two evaluations, so the pruner could compare nothing: {fix}"
        )
    return problems
