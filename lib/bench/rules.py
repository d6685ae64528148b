"""What lib/bench registers with the layers below it: the INFERENCE_BENCH_LENGTHS
check (lib/bench/Kconfig), run on load rather than after a run has trained, and
the inference figures every trained model gets at the end of its run
(lib/train/hooks.py). lib/bench/inference.py owns both and imports torch only
inside the functions that measure.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lib.bench.inference import check_lengths, inference_at_end
from lib.config.rules import rule
from lib.train.hooks import Analysis, RunContext, analysis

if TYPE_CHECKING:
    from lib.model.interface import LanguageModel

rule(check_lengths)


@analysis
class InferenceFigures(Analysis):
    """INFERENCE_BENCH at the end of the run."""

    def __init__(self, context: RunContext):
        self.context = context

    def at_end(self, model: LanguageModel, loaders: dict[str, Any]) -> None:
        c = self.context
        inference_at_end(c.run, model, c.run_dir, c.log)
