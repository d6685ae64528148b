"""Where a run's dataset lives, and preparing it the first time it is needed."""

from __future__ import annotations

import fcntl
import hashlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from lib.data.meta import dataset_dir_name
from lib.data.sources import DataError
from lib.paths import from_root

if TYPE_CHECKING:
    from lib.config.symbols import Data


def _dataset(d: Data) -> tuple[str, str | None]:
    """The dataset's name and, for a custom corpus, its path from the project root."""
    dataset = d.GPT2_DATASET
    assert dataset is not None, "derived from the dataset choice, which always has a member"
    if dataset != "custom":
        return dataset, None
    return dataset, str(from_root(d.DATA_CUSTOM_PATH))


def data_dir(d: Data) -> Path:
    """DATA_DIR/<dataset>-<tokenizer>[-cap<N>] (a BPE's vocabulary size is part of
    <tokenizer>: bpe8192); a custom corpus is keyed by its path too, so two custom
    corpora never share a folder."""
    dataset, custom = _dataset(d)
    if custom is not None:
        dataset = f"custom_{hashlib.sha1(custom.encode()).hexdigest()[:8]}"
    return from_root(d.DATA_DIR) / dataset_dir_name(
        dataset, d.DATA_TOKENIZER, d.DATA_TOKEN_CAP, d.DATA_BPE_VOCAB_SIZE
    )


def _usable(path: Path, log: Callable[[str], None]) -> bool:
    """True when path can be used as it is; False when it is to be prepared
    (saying why, when it was there but damaged); DataError when it must not
    be touched (lib/data/validate.py)."""
    from lib.data.validate import inspect  # numpy: only where data is read

    verdict = inspect(path)
    if verdict.state == "refuse":
        raise DataError(verdict.message)
    if verdict.state == "rebuild":
        log(f"data: {verdict.message}")
    return verdict.state == "ok"


def ensure_prepared(d: Data, log: Callable[[str], None] = print) -> Path:
    """The prepared dataset folder, tokenizing the corpus first if needed; its
    token files are checked on the way (lib/data/validate.py)."""
    from lib.data.corpus import prepare
    from lib.data.validate import inspect  # numpy and the tokenizers: only for real runs

    path = data_dir(d)
    if inspect(path).state == "ok":
        return path
    # Runs of a matrix started together all find the folder missing: the
    # first to lock DATA_DIR tokenizes, the others wait and then read it. The
    # lock is on the folder itself, so a failed preparation leaves no file.
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = os.open(path.parent, os.O_RDONLY)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _usable(path, log):
            return path
        dataset, custom = _dataset(d)
        log(
            f"preparing dataset '{dataset}' with the {d.DATA_TOKENIZER} tokenizer "
            f"into {path} (once)"
        )
        return prepare(
            dataset,
            d.DATA_TOKENIZER,
            path,
            token_cap=d.DATA_TOKEN_CAP,
            val_fraction=d.DATA_VAL_FRACTION,
            custom_path=custom,
            bpe_vocab_size=d.DATA_BPE_VOCAB_SIZE,
        )
    finally:
        os.close(lock)  # releases the lock
