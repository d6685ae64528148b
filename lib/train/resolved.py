"""What a run will actually do, built by the code the trainer uses.

resolved_settings(run) builds the training stack with the trainer's own
build_training (lib/train/build.py) on the meta device (no memory, no time),
and the LR schedule, and describes each by what it holds: the family's config, the
optimizer's class, defaults, per-group hyper-parameters and settings, the
pruner's settings, the LR at a few steps, the batch plan, the prepared
data's folder (dataset, tokenizer, cap) and the run's folder. Two configurations
that train differently must resolve differently; a visible symbol whose
change leaves this unchanged is read by nobody on the run's path
(tests/test_symbols_read.py checks every one).
"""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING, Any

import torch

from lib.data.prepared import data_dir
from lib.model import registry
from lib.run.rundir import results_root
from lib.train.build import build_training
from lib.train.naming import run_id
from lib.train.schedule import lr_schedule

if TYPE_CHECKING:
    from lib.config.run_config import RunConfig

_PLAIN = (bool, int, float, str, type(None))


def _settings(obj: Any) -> dict[str, Any]:
    """An object's plain-valued attributes (numbers, strings, flags, tuples of them)."""
    out: dict[str, Any] = {}
    for name, value in vars(obj).items():
        if isinstance(value, tuple) and all(isinstance(v, _PLAIN) for v in value):
            out[name] = value
        elif isinstance(value, _PLAIN):
            out[name] = value
    return out


def describe_optimizer(optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    groups = [
        {k: v for k, v in g.items() if k != "params"} | {"size": len(g["params"])}
        for g in optimizer.param_groups
    ]
    return {
        "class": type(optimizer).__name__,
        "defaults": dict(optimizer.defaults),
        "groups": groups,
        "settings": _settings(optimizer),
    }


def resolved_settings(run: RunConfig, vocab_size: int = 50257) -> dict[str, Any]:
    family = registry.family(run.MODEL)
    training = build_training(run, torch.device("meta"), vocab_size)
    config, optimizer, pruner = training.config, training.optimizer, training.pruner
    schedule = lr_schedule(run.train)
    total = run.GPT2_MAX_ITERS
    steps = sorted({0, 1, 2, run.GPT2_WARMUP_STEPS, total // 3, total // 2, total - 1, total})
    return {
        "model": {"family": family.name, "variant": family.variant(run), **asdict(config)},
        "optimizer": describe_optimizer(optimizer),
        "pruner": None if pruner is None else {"class": type(pruner).__name__, **_settings(pruner)},
        "lr": [schedule(s) for s in steps],
        "plan": run.derived(),
        "compile": training.step.compile.compiled,
        "data": str(data_dir(run.data)),
        "run_dir": str(results_root(run.run) / run_id(run, now=0.0)),
    }
