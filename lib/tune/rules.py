"""MATRIX_TUNE's rules: the symbols to tune exist, are numeric and have sound
ranges (lib/tune/space.py), and each trial reaches two evaluations, so that the
pruner has something to compare. That at least one symbol applies to some
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
    try:  # a symbol hidden here is left out (MUON_LR in a matrix's AdamW runs)
        space.parse(run.MATRIX_TUNE_SYMBOLS or "", run.values, skip_hidden=True)
    except ConfigError as err:
        problems += err.problems
    budget = Budget.from_run(run)
    if budget.steps < 2 * budget.eval_interval:
        need = -(-200 * budget.eval_interval // run.GPT2_MAX_ITERS)  # percent, rounded up
        problems.append(
            f"CONFIG_MATRIX_TUNE_FRACTION={run.MATRIX_TUNE_FRACTION} gives each trial "
            f"{budget.steps} of CONFIG_GPT2_MAX_ITERS={run.GPT2_MAX_ITERS} steps, fewer than "
            f"two evaluations (CONFIG_GPT2_EVAL_INTERVAL={budget.eval_interval}), so the pruner "
            f"could compare nothing: raise the fraction to {min(need, 100)} or more, or lower "
            f"GPT2_EVAL_INTERVAL"
        )
    return problems
