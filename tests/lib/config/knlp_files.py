"""knlp-format files for the knlp tests: the head every test file starts from."""

from __future__ import annotations

import subprocess
from pathlib import Path

import torch

from lib.config.knlp.table import SYMBOLS
from lib.config.run_config import RunConfig, load_valid, typed_values
from lib.prune.pruner import Pruner

HEAD = [
    "# a knlp GPT-2 experiment",
    "CONFIG_MODEL_MODE_SINGLE=y",
    "CONFIG_MODEL_SELECT_GPT2=y",
    "CONFIG_OPTIMIZER_MODE_SINGLE=y",
    "CONFIG_OPTIMIZER_SELECT_ADAMW=y",
    "CONFIG_PRUNING_MODE_NONE=y",
]


def loaded(write_config, *lines: str) -> tuple[RunConfig, list[str]]:
    notes: list[str] = []
    kconf = load_valid(write_config(*HEAD, *lines), notes)
    return RunConfig.from_values(typed_values(kconf)), notes


def knlp_default(name: str) -> str:
    """knlp's unconditional-for-GPT-2 default of `name` (the table's first default)."""
    return SYMBOLS[name][3][0][0].strip('"')


SPAM_HEAD = [*HEAD[:4], "CONFIG_OPTIMIZER_SELECT_ADAMWSPAM=y", HEAD[5], 'CONFIG_DEVICE="cpu"']

PRUNE_HEAD = [
    *HEAD[:4],
    "CONFIG_OPTIMIZER_SELECT_ADAMWPRUNE=y",
    "CONFIG_PRUNING_MODE_SINGLE=y",
    "CONFIG_PRUNING_SELECT_STATE=y",
    'CONFIG_DEVICE="cpu"',
]


def magnitude_pruner(run: RunConfig) -> Pruner:
    """The run's PRUNING_* schedule on one 4x4 tensor: which steps update the
    masks, at what sparsity (what the knlp schedule tests compare step by step)."""
    return Pruner(
        [("w", torch.nn.Parameter(torch.ones(4, 4)))],
        method="magnitude",
        target=run.PRUNING_TARGET_SPARSITY,
        warmup=run.PRUNING_WARMUP,
        ramp_end=run.PRUNING_RAMP_END,
        frequency=run.PRUNING_FREQUENCY,
        schedule=run.PRUNING_SCHEDULE,
        scope=run.PRUNING_SCOPE,
    )


def stand_in_checkout(root: Path, files: dict[str, str], kconfig: str | None = None) -> Path:
    """A knlp checkout for scripts/check_knlp.sh: a git repository at root whose
    Kconfig is our table's tree (or `kconfig`), with these GPT-2 defconfigs."""
    from lib.config.knlp.tree import render

    (root / "gpt2/defconfigs").mkdir(parents=True)
    (root / "Kconfig").write_text(render() if kconfig is None else kconfig)
    for name, text in files.items():
        (root / "gpt2/defconfigs" / name).write_text(text)
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run(git + ["add", "."], check=True)
    subprocess.run(git + ["commit", "-qm", "x"], check=True)
    return root
