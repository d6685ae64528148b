"""What a prepared dataset folder holds and its name: meta.json beside train.bin and
val.bin (written by lib/data/corpus.py). Light on purpose: the configuration
check reads the prepared vocabulary through it (lib/data/vocab.py), so it
imports neither numpy nor the tokenizers.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from lib.data.sources import DataError

FORMAT_VERSION = 1
META_NAME = "meta.json"
SPLIT_FILES = {"train": "train.bin", "val": "val.bin"}
# The token files' dtypes (corpus.token_dtype) -> bytes per token
ITEMSIZES = {"uint16": 2, "uint32": 4}


def dataset_dir_name(
    dataset: str, tokenizer: str, token_cap: int = 0, bpe_vocab_size: int | None = None
) -> str:
    """Folder name for a prepared dataset, e.g. "shakespeare-gpt2", "shakespeare-bpe8192"
    or "finewebedu-gpt2-cap1000000"."""
    if tokenizer == "bpe":
        tokenizer = f"bpe{bpe_vocab_size}"
    return f"{dataset}-{tokenizer}" + (f"-cap{token_cap}" if token_cap else "")


def load_meta(out_dir: Path) -> dict[str, Any]:
    """meta.json of a prepared dataset; DataError if it is missing or unreadable."""
    path = Path(out_dir) / META_NAME
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataError(f"{path} is missing: the dataset in {out_dir} is not prepared.") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataError(
            f"{path} is unreadable ({exc}); delete {out_dir} to prepare it again."
        ) from exc
    needed = ("format_version", "dtype", "vocab_size", "train_tokens", "val_tokens", "tokenizer")
    missing = [k for k in needed if not isinstance(meta, dict) or k not in meta]
    if missing:
        raise DataError(f"{path} lacks {', '.join(missing)}; delete {out_dir} to prepare it again.")
    if meta["format_version"] != FORMAT_VERSION:
        raise DataError(
            f"{path} has format version {meta['format_version']}, this code reads "
            f"{FORMAT_VERSION}; delete {out_dir} to prepare it again."
        )
    return meta


def is_prepared(out_dir: Path) -> bool:
    """Whether out_dir holds a complete dataset: meta.json agrees with the .bin sizes."""
    try:
        meta = load_meta(out_dir)
        itemsize = ITEMSIZES[meta["dtype"]]
        for split, fname in SPLIT_FILES.items():
            size = (Path(out_dir) / fname).stat().st_size
            if size != int(meta[f"{split}_tokens"]) * itemsize or size == 0:
                return False
    except (DataError, OSError, KeyError, TypeError, ValueError):
        return False
    return True
