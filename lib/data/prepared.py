"""Where a run's dataset lives, and preparing it the first time it is needed."""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Callable

from lib.data.corpus import dataset_dir_name, is_prepared, prepare
from lib.kconfig import ROOT


def _under_root(path: str) -> Path:
    p = Path(path)
    return p if p.is_absolute() else ROOT / p


def data_dir(run: Any) -> Path:
    """DATA_DIR/<dataset>-<tokenizer>[-cap<N>] (a BPE's vocabulary size is part of
    <tokenizer>: bpe8192); a custom corpus is keyed by its path too, so two custom
    corpora never share a folder."""
    dataset = run.GPT2_DATASET
    if dataset == "custom":
        digest = hashlib.sha1(str(_under_root(run.DATA_CUSTOM_PATH)).encode()).hexdigest()[:8]
        dataset = f"custom_{digest}"
    return _under_root(run.DATA_DIR) / dataset_dir_name(dataset, run.DATA_TOKENIZER,
                                                        run.DATA_TOKEN_CAP,
                                                        run.get("DATA_BPE_VOCAB_SIZE"))


def ensure_prepared(run: Any, log: Callable[[str], None] = print) -> Path:
    """The prepared dataset folder, tokenizing the corpus first if needed."""
    path = data_dir(run)
    if is_prepared(path):
        return path
    log(f"preparing dataset '{run.GPT2_DATASET}' with the {run.DATA_TOKENIZER} tokenizer "
        f"into {path} (once)")
    custom = str(_under_root(run.DATA_CUSTOM_PATH)) if run.GPT2_DATASET == "custom" else None
    return prepare(run.GPT2_DATASET, run.DATA_TOKENIZER, path, token_cap=run.DATA_TOKEN_CAP,
                   val_fraction=run.DATA_VAL_FRACTION, custom_path=custom,
                   bpe_vocab_size=run.get("DATA_BPE_VOCAB_SIZE"))
