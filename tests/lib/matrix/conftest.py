"""A .config in test-matrix mode for a tiny char model on a synthetic corpus."""

from __future__ import annotations

from pathlib import Path

import pytest

from lib.config.kconfig import open_tree
from lib.config.run_config import write_outputs
from tests.lib.conftest import synthetic_corpus

TINY = {
    "GPT2_DATASET_CUSTOM": "y",
    "DATA_TOKENIZER_CHAR": "y",
    "GPT2_N_LAYER": "1",
    "GPT2_N_HEAD": "2",
    "GPT2_N_EMBD": "32",
    "GPT2_BLOCK_SIZE": "32",
    "BATCH_SIZE": "4",
    "GPT2_MAX_ITERS": "12",
    "GPT2_EVAL_INTERVAL": "4",
    "TRAIN_EVAL_ITERS": "2",
    "GPT2_WARMUP_STEPS": "2",
    "TRAIN_LOG_INTERVAL": "4",
    "DEVICE_CPU": "y",
}
# Set last, where pruning is enabled at all.
PRUNING = {"PRUNING_WARMUP": "2", "PRUNING_RAMP_END": "8", "PRUNING_FREQUENCY": "2"}


def write_config(path: Path, symbols: dict[str, str]) -> Path:
    """Set symbols in order on the Kconfig tree (each must take) and write .config."""
    kconf = open_tree()
    if (
        not kconf.syms["PRUNING_MODE_NONE"].tri_value
        or symbols.get("PRUNING_MODE", "none") != "none"
    ):
        symbols = {**symbols, **PRUNING}
    for name, value in symbols.items():
        if name in kconf.named_choices:
            kconf.syms[f"{name}_{value.upper()}"].set_value(2)
            continue
        sym = kconf.syms[name]
        sym.set_value(value)
        assert sym.str_value == value, f"{name}={value} did not take (got {sym.str_value!r})"
    write_outputs(kconf, path, path.parent / "config.py")
    return path


@pytest.fixture
def matrix_config(tmp_path):
    """Build a test-matrix .config: the tiny run, then the given symbols."""
    corpus = synthetic_corpus(tmp_path / "corpus.txt", lines=400)
    fixed = {
        **TINY,
        "DATA_CUSTOM_PATH": str(corpus),
        "DATA_DIR": str(tmp_path / "data"),
        "RESULTS_DIR": str(tmp_path / "results"),
    }

    def build(**symbols: str) -> Path:
        return write_config(tmp_path / ".config", {**fixed, **symbols})

    return build
