"""What lib/eval registers with the layers below it: the MECHINT_KV_* check
(lib/eval/Kconfig), run on load rather than after a run has trained, and the
trainer's analyses it owns (lib/train/hooks.py): text samples at each
evaluation (EVAL_SAMPLES) and the K/V circuit at the end (MECHINT_KV). Their
modules import torch, so they load when a run starts, not here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lib.config.rules import rule
from lib.eval.kv_circuit_settings import check_settings
from lib.train.hooks import Analysis, RunContext, analysis

if TYPE_CHECKING:
    from lib.config.run_config import RunConfig
    from lib.model.interface import LanguageModel


@rule
def kv_circuit_settings(run: RunConfig) -> list[str]:
    return check_settings(run.eval)


@analysis
def samples(context: RunContext) -> Analysis:
    if not context.run.EVAL_SAMPLES:
        return Analysis()  # nothing to import: torch and the tokenizers
    from lib.eval.samples import SampleLog

    return SampleLog(
        context.run.eval, context.run_dir, context.tokenizer, context.log, context.is_main
    )


@analysis
class KvCircuit(Analysis):
    """MECHINT_KV at the end of the run, on the run's own loaders."""

    def __init__(self, context: RunContext):
        self.context = context

    def at_end(self, model: LanguageModel, loaders: dict[str, Any]) -> None:
        if not self.context.run.MECHINT_KV:
            return
        from lib.eval.kv_circuit import kv_circuit_at_end

        c = self.context
        run = c.run
        kv_circuit_at_end(run.eval, run.speed, run.train, model, loaders, c.run_dir, c.log)
