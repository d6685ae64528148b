"""The trainer's analyses (lib/train/hooks.py): one registered by another package
runs after every evaluation and once at the end, once the final record is on
disk, on the run's model and loaders; the loop itself imports none of them."""

from __future__ import annotations

import json

from lib.train import hooks
from lib.train.naming import create_run_dir
from lib.train.trainer import Trainer


def test_a_registered_analysis_runs_after_each_evaluation_and_at_the_end(tiny_run, monkeypatch):
    seen: list[tuple] = []

    class Probe(hooks.Analysis):
        def __init__(self, context: hooks.RunContext):
            self.context = context
            seen.append(("start", context.run.GPT2_MAX_ITERS, context.is_main))

        def after_eval(self, step, model, device):
            seen.append(("eval", step, device.type))

        def at_end(self, model, loaders):
            record = json.loads((self.context.run_dir / "metrics.json").read_text())
            seen.append(("end", record["status"], record["iterations"], sorted(loaders)))

    monkeypatch.setattr(hooks, "ANALYSES", [*hooks.ANALYSES, Probe])
    run = tiny_run(GPT2_MAX_ITERS=6, GPT2_EVAL_INTERVAL=3, RUN_NAME="hooks")
    trainer = Trainer(run, create_run_dir(run), log=lambda line: None)
    trainer.train()
    assert seen == [
        ("start", 6, True),
        ("eval", 3, "cpu"),
        ("eval", 6, "cpu"),
        ("end", "completed", 6, ["train", "val"]),
    ]
