"""knlp-format files for the knlp tests: the head every test file starts from."""

from __future__ import annotations

from lib.config.knlp.table import SYMBOLS
from lib.config.run_config import RunConfig, load_valid, typed_values

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
