"""The trainer's extension point: analyses of the model that other packages own
(text samples at each evaluation, inference figures and the K/V circuit at the
end of the run) register here, so the loop runs them without importing them.

An analysis is registered as a factory: called once per run with its RunContext,
it returns an Analysis whose `after_eval` runs after every evaluation and whose
`at_end` runs once training stopped and metrics.json holds the final status.
The owners register from their registration modules (lib/bench/rules.py,
lib/eval/rules.py), which lib/rules.py imports at the top of every entry point;
`start` refuses to run before that, so every trainer runs every registered
analysis, in registration order.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lib.config.rules import require_owners

if TYPE_CHECKING:
    import torch

    from lib.config.run_config import RunConfig
    from lib.model.interface import LanguageModel


@dataclass(frozen=True)
class RunContext:
    run: RunConfig
    run_dir: Path
    log: Callable[[str], None]
    is_main: bool  # the first rank of a distributed run
    tokenizer: dict[str, Any]  # the prepared data's tokenizer (meta.json)


class Analysis:
    """What a registered analysis does; both steps do nothing unless overridden.
    Neither may fail the run: each catches and logs its own errors."""

    def after_eval(self, step: int, model: LanguageModel, device: torch.device) -> None:
        """After the evaluation at `step`, on every rank."""

    def at_end(self, model: LanguageModel, loaders: dict[str, Any]) -> None:
        """Once, after the run's final record is written, on every rank."""


Factory = Callable[[RunContext], Analysis]
ANALYSES: list[Factory] = []


def analysis(factory: Factory) -> Factory:
    """Register `factory`: every trainer built from now on runs its analysis."""
    if factory not in ANALYSES:
        ANALYSES.append(factory)
    return factory


def start(context: RunContext) -> list[Analysis]:
    """Every registered analysis, set up for this run."""
    require_owners("a trainer started")
    return [factory(context) for factory in ANALYSES]
