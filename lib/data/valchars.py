"""Characters of a prepared validation split: a loss per token made comparable
across tokenizers.

A loss per token depends on how much text a token holds (one character for
char, about three for an 8k BPE on Shakespeare), so runs with different
tokenizers compare per character of the validation text: the validation loss
times the split's tokens over its characters. The characters are counted
exactly, by decoding val.bin with the dataset's own tokenizer, once: the count
is kept in val_chars.json beside meta.json (meta.json is left as prepared, so
no existing dataset or run changes), tied to the split by its token count and
checksum. An end-of-text token is a document boundary, not text: it counts no
characters.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from lib.atomic import read_json_object, write_json_atomic
from lib.data.meta import SPLIT_FILES
from lib.data.tokenizers import Tokenizer, tokenizer_from_meta

FILE = "val_chars.json"
# Ids decoded at once at most: bounds memory on a large split. A document longer
# than this is decoded in pieces, which can split a multi-byte character between
# two pieces (then counted as two replacement characters): at most one character
# per MAX_PIECE tokens, and never for the char tokenizer or a split of short documents.
MAX_PIECE = 1 << 20


def _pieces(ids: np.ndarray, eot: int | None) -> Iterator[np.ndarray]:
    """ids cut at each end-of-text token (dropped) and into MAX_PIECE-long pieces."""
    cuts = np.flatnonzero(ids == eot) if eot is not None else np.empty(0, dtype=np.int64)
    start = 0
    for end in [*cuts.tolist(), len(ids)]:
        for s in range(start, end, MAX_PIECE):
            yield ids[s : min(s + MAX_PIECE, end)]
        start = end + 1


def count_chars(ids: np.ndarray, tok: Tokenizer) -> int:
    """Characters of the text that ids decode to, end-of-text tokens excluded."""
    return sum(len(tok.decode(piece.tolist())) for piece in _pieces(ids, tok.eot_token))


def _key(meta: dict[str, Any]) -> dict[str, Any]:
    """What ties a count to one prepared split."""
    return {
        "val_tokens": int(meta["val_tokens"]),
        "val_checksum": (meta.get("checksums") or {}).get("val"),
        "tokenizer": meta["tokenizer"].get("name"),
    }


def val_chars(data_dir: Path, meta: dict[str, Any]) -> int:
    """Characters of the validation text of the dataset prepared in data_dir
    (meta: its meta.json), counted once and then read from val_chars.json."""
    path, key = Path(data_dir) / FILE, _key(meta)
    cached = read_json_object(path)  # {} when absent or damaged: counted again
    if {k: cached.get(k) for k in key} == key and isinstance(cached.get("val_chars"), int):
        return int(cached["val_chars"])
    ids = np.memmap(Path(data_dir) / SPLIT_FILES["val"], dtype=np.dtype(meta["dtype"]), mode="r")
    chars = count_chars(np.asarray(ids), tokenizer_from_meta(meta))
    try:
        write_json_atomic(path, {**key, "val_chars": chars})
    except OSError:
        pass  # a read-only dataset folder: counted again by the next run
    return chars


def per_char_record(data_dir: Path, meta: dict[str, Any]) -> dict[str, Any]:
    """metrics.json's fields: the split's characters and tokens per character,
    the factor that turns a validation loss per token into one per character."""
    chars = val_chars(data_dir, meta)
    return {"val_chars": chars, "val_tokens_per_char": int(meta["val_tokens"]) / max(chars, 1)}
