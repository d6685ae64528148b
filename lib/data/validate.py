"""Is a prepared dataset folder usable, and if not, may it be prepared again?

inspect() looks at a folder the way a run opens it: meta.json, then for each
split file its size (a whole number of tokens, the count meta.json records),
its dtype (the one the vocabulary needs), and its first and last MiB
(tokenfile.py: the checksum recorded at preparation, and every id below the
vocabulary size). The verdict says what was found and what to do:

  absent   nothing there yet: prepare it.
  ok       use it.
  rebuild  ours and damaged in a way preparing again repairs without losing
           anything (a split file missing or cut short by an interrupted copy
           or a full disk, an unreadable meta.json, an older format): the
           caller prints the notice and prepares it again.
  refuse   its contents are not what this project wrote there: the split
           files changed in place (the checksum differs, or ids outside the
           vocabulary), or a folder without meta.json, which no preparation
           of ours leaves. Replacing it could destroy someone's data, so the
           caller stops with the message, which says how to prepare it again.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from lib.data.corpus import token_dtype
from lib.data.meta import FORMAT_VERSION, META_NAME, SPLIT_FILES
from lib.data.sources import DataError
from lib.data.tokenfile import read_ends


@dataclass(frozen=True)
class Verdict:
    state: str  # "absent", "ok", "rebuild" or "refuse"
    found: str = ""  # what is wrong, naming the file
    action: str = ""  # what is done about it, or what the user can do

    @property
    def message(self) -> str:
        return f"{self.found}. {self.action}."


def _again(folder: Path) -> str:
    return (
        f"Delete {folder} and run `make prepare` (or the run) to tokenize the dataset "
        f"again, or point DATA_DIR elsewhere"
    )


def _rebuild(found: str, folder: Path, meta: dict[str, Any] | None = None) -> Verdict:
    source = f" from {meta['source']}" if meta and meta.get("source") else ""
    return Verdict(
        "rebuild", found, f"Preparing the dataset again{source}, which replaces {folder}"
    )


def _read_meta(path: Path) -> dict[str, Any] | str:
    """meta.json, or why it cannot be used."""
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        return f"{path} is unreadable ({exc})"
    if not isinstance(meta, dict):
        return f"{path} holds no JSON object"
    if meta.get("format_version") != FORMAT_VERSION:
        return (
            f"{path} has format version {meta.get('format_version')}, this code "
            f"reads {FORMAT_VERSION}"
        )
    needed = ("dtype", "vocab_size", "train_tokens", "val_tokens", "tokenizer")
    missing = [k for k in needed if k not in meta]
    if missing:
        return f"{path} lacks {', '.join(missing)}"
    try:
        dtype, vocab = np.dtype(meta["dtype"]), int(meta["vocab_size"])
        counts = [int(meta[f"{split}_tokens"]) for split in SPLIT_FILES]
    except (TypeError, ValueError) as exc:
        return f"{path} has a malformed field ({exc})"
    if vocab < 1 or min(counts) < 1 or dtype != token_dtype(vocab):
        return (
            f"{path} is inconsistent: dtype {meta['dtype']} for a vocabulary of {vocab} "
            f"tokens (needs {token_dtype(max(vocab, 1)).name}), token counts {counts}"
        )
    return meta


def _split_size(folder: Path, split: str, meta: dict[str, Any]) -> str | None:
    """Why the split file's size is wrong (missing, cut, not whole tokens), or None."""
    path = folder / SPLIT_FILES[split]
    itemsize = np.dtype(meta["dtype"]).itemsize
    count = int(meta[f"{split}_tokens"])
    try:
        size = path.stat().st_size
    except OSError:
        return f"{path} is missing (meta.json records {count:,} {split} tokens)"
    if size == count * itemsize:
        return None
    whole = "" if size % itemsize == 0 else f", not a whole number of {meta['dtype']} tokens"
    return (
        f"{path} is {size:,} bytes, but meta.json records {count:,} tokens of "
        f"{itemsize} bytes = {count * itemsize:,} bytes{whole} "
        f"({'cut short' if size < count * itemsize else 'longer than written'})"
    )


def _split_contents(folder: Path, split: str, meta: dict[str, Any]) -> str | None:
    """Why the split file's ends are not what preparation wrote, or None."""
    path = folder / SPLIT_FILES[split]
    dtype, vocab = np.dtype(meta["dtype"]), int(meta["vocab_size"])
    ends = read_ends(path, dtype.itemsize)
    bad = ends.first_out_of_range(dtype, vocab)
    if bad is not None:
        position, token = bad
        return (
            f"{path} holds token id {token:,} at position {position:,}, but its "
            f"{meta['tokenizer'].get('name', '')} tokenizer has {vocab:,} ids "
            f"(0 to {vocab - 1:,}): the file does not hold what was prepared"
        )
    recorded = (meta.get("checksums") or {}).get(split)
    if recorded is not None and ends.digest() != recorded:
        return (
            f"{path} changed after it was prepared: the SHA-256 of its first and last "
            f"MiB differs from the one meta.json records"
        )
    return None


def inspect(folder: Path) -> Verdict:
    """The verdict on a prepared dataset folder (module docstring)."""
    folder = Path(folder)
    if not folder.is_dir() or not any(folder.iterdir()):
        return Verdict("absent")
    meta_path = folder / META_NAME
    if not meta_path.exists():
        held = ", ".join(sorted(p.name for p in folder.iterdir())[:5])
        return Verdict(
            "refuse",
            f"{folder} holds {held} but no {META_NAME}: it was not "
            f"prepared by this project (every preparation writes "
            f"{META_NAME}), so it is neither read nor replaced",
            _again(folder),
        )
    meta = _read_meta(meta_path)
    if isinstance(meta, str):
        return _rebuild(meta, folder)
    for split in SPLIT_FILES:
        why = _split_size(folder, split, meta)
        if why:
            return _rebuild(why, folder, meta)
    for split in SPLIT_FILES:
        why = _split_contents(folder, split, meta)
        if why:
            return Verdict(
                "refuse",
                f"{why}. It is neither used nor replaced, since "
                f"something other than preparation wrote it",
                _again(folder),
            )
    return Verdict("ok")


def check_prepared(folder: Path) -> None:
    """DataError unless inspect() finds folder usable; what a reader (a loader, an
    evaluation) calls, since it may not prepare the dataset itself."""
    verdict = inspect(folder)
    if verdict.state == "ok":
        return
    if verdict.state == "absent":
        raise DataError(
            f"{folder} holds no prepared dataset: run `make prepare` with the run's configuration."
        )
    if verdict.state == "rebuild":  # this reader cannot: say who can
        raise DataError(
            f"{verdict.found}. Run `make prepare` with the run's configuration "
            f"to prepare it again (a training run does so when it starts)."
        )
    raise DataError(verdict.message)
