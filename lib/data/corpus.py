"""Tokenize a dataset once into train.bin, val.bin and meta.json.

The .bin files are flat arrays of token ids (uint16, or uint32 for
vocabularies above 65535) that BatchLoader memory-maps, as in nanoGPT.

Preparation is atomic: everything is written into a hidden sibling folder
that is renamed onto out_dir only when complete, so an interruption or an
error leaves no half-written dataset and keeps any previous good one.
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

# What a prepared folder holds is lib/data/meta.py's (read on every configuration check)
from lib.data.meta import FORMAT_VERSION, META_NAME, SPLIT_FILES
from lib.data.sources import DataError, Source, open_source
from lib.data.tokenfile import ends_digest
from lib.data.tokenizers import TOKENIZERS, Tokenizer, build_tokenizer
from lib.data.tokenizers.bpe import bpe_streams
from lib.data.tokenizers.documents import BATCH_CHARS, encode_documents


def token_dtype(vocab_size: int) -> np.dtype:
    return np.dtype(np.uint16 if vocab_size <= 65535 else np.uint32)


def write_tokens(docs: Iterable[str], tok: Tokenizer, path: Path, cap: int, desc: str) -> int:
    """Encode docs into path, at most cap tokens if cap > 0; returns the count."""
    dtype = token_dtype(tok.vocab_size)
    # A small cap needs small batches, or a whole batch is downloaded for
    # nothing (text runs at most ~8 characters per token).
    batch_chars = min(BATCH_CHARS, max(1 << 16, 8 * cap)) if cap else BATCH_CHARS
    count = 0
    with (
        open(path, "wb") as f,
        tqdm(desc=desc, unit="tok", unit_scale=True, total=cap or None) as bar,
    ):
        for ids in encode_documents(docs, tok, batch_chars):
            if cap:
                ids = ids[: cap - count]
            np.asarray(ids, dtype=dtype).tofile(f)
            count += len(ids)
            bar.update(len(ids))
            if cap and count >= cap:
                break  # stop reading: bounds the download of streamed data
    return count


def split_tail(
    train_path: Path, val_path: Path, dtype: np.dtype, val_fraction: float
) -> tuple[int, int]:
    """Move the last val_fraction of train_path's tokens into val_path."""
    n = train_path.stat().st_size // dtype.itemsize
    n_train = int(n * (1.0 - val_fraction))
    if n_train < 1 or n - n_train < 1:
        raise DataError(
            f"Only {n} tokens: too few to hold out a validation share of {val_fraction}."
        )
    data = np.memmap(train_path, dtype=dtype, mode="r")
    with open(val_path, "wb") as f:
        for start in range(n_train, n, 1 << 24):  # chunks keep memory flat
            data[start : min(start + (1 << 24), n)].tofile(f)
    del data  # release the mapping before truncating the file
    os.truncate(train_path, n_train * dtype.itemsize)
    return n_train, n - n_train


# --- tokenizer choice ------------------------------------------------------


def _capped(docs: Iterable[str], cap: int) -> Iterator[str]:
    total = 0
    for doc in docs:
        if cap and total >= cap:
            return
        yield doc
        total += len(doc)


def _char_documents(source: Source, cap: int, val_cap: int) -> dict[str, list[str]]:
    # The char vocabulary must be known before the first id is written, so
    # the (small) corpus is read into memory once; one char is one token.
    docs = {"train": list(_capped(source.documents("train"), cap))}
    if source.has_val_split:
        docs["val"] = list(_capped(source.documents("val"), val_cap))
    return docs


def _streams(
    source: Source, tokenizer: str, cap: int, val_cap: int
) -> tuple[Tokenizer, dict[str, Iterable[str]]]:
    if tokenizer == "char":
        docs = _char_documents(source, cap, val_cap)
        # "\n" too: encode_documents separates documents with a blank line.
        text = "".join("".join(d) for d in docs.values()) + "\n"
        return build_tokenizer("char", text), dict(docs)
    streams: dict[str, Iterable[str]] = {"train": source.documents("train")}
    if source.has_val_split:
        streams["val"] = source.documents("val")
    return build_tokenizer(tokenizer), streams


# --- prepare -------------------------------------------------------------------


def _check_args(
    dataset: str, tokenizer: str, token_cap: int, val_fraction: float, bpe_vocab_size: int | None
) -> None:
    if tokenizer not in TOKENIZERS:
        raise ValueError(f"unknown tokenizer {tokenizer!r}; allowed: {', '.join(TOKENIZERS)}")
    if tokenizer == "bpe" and not bpe_vocab_size:
        raise ValueError("the bpe tokenizer needs bpe_vocab_size")
    if token_cap < 0:
        raise ValueError(f"token_cap must be >= 0 (0 = no cap), not {token_cap}")
    if not 0.0 < val_fraction < 1.0:
        raise ValueError(f"val_fraction must be between 0 and 1 (exclusive), not {val_fraction}")


def _write_splits(
    source: Source,
    tokenizer: str,
    tmp: Path,
    token_cap: int,
    val_fraction: float,
    bpe_vocab_size: int | None = None,
) -> dict[str, Any]:
    """Write train.bin and val.bin into tmp; returns the meta fields they determine."""
    # With its own validation split a dataset's val part is capped in
    # proportion, so a capped run does not stream a whole validation set.
    val_cap = max(1, int(token_cap * val_fraction)) if token_cap else 0
    val_from = "dataset validation split"
    tok: Tokenizer
    if tokenizer == "bpe":  # trained first, on the training text only
        assert bpe_vocab_size is not None, "_check_args requires it for bpe"
        tok, streams, val_from = bpe_streams(source, bpe_vocab_size, token_cap, val_fraction)
    else:
        tok, streams = _streams(source, tokenizer, token_cap, val_cap)
    tok.save_files(tmp)
    dtype = token_dtype(tok.vocab_size)
    train, val = tmp / SPLIT_FILES["train"], tmp / SPLIT_FILES["val"]
    desc = f"{source.name}/{tok.name}"
    n_train = write_tokens(streams["train"], tok, train, token_cap, f"{desc} train")
    if "val" in streams:
        n_val = write_tokens(streams["val"], tok, val, val_cap, f"{desc} val")
        if n_train < 1 or n_val < 1:
            raise DataError(f"{source.name}: empty split (train {n_train}, val {n_val} tokens).")
    else:
        n_train, n_val = split_tail(train, val, dtype, val_fraction)
        val_from = f"last {val_fraction} of the tokens"
    return {
        "tokenizer": tok.to_meta(),
        "vocab_size": tok.vocab_size,
        "dtype": dtype.name,
        "train_tokens": n_train,
        "val_tokens": n_val,
        "val_from": val_from,
        # SHA-256 of each file's first and last MiB, checked whenever a run
        # opens the dataset (lib/data/validate.py).
        "checksums": {
            split: ends_digest(tmp / name, dtype.itemsize) for split, name in SPLIT_FILES.items()
        },
    }


def _remove_stale_partials(out_dir: Path) -> None:
    # A killed run (SIGKILL, power loss) cannot clean up after itself; its
    # folder carries its pid, so remove the ones whose process is gone.
    for old in out_dir.parent.glob(f".{out_dir.name}.partial-*"):
        m = re.match(r".*\.partial-(\d+)-", old.name)
        if m is None:
            continue
        try:
            os.kill(int(m.group(1)), 0)
        except ProcessLookupError:
            shutil.rmtree(old, ignore_errors=True)
        except OSError:
            pass  # alive but not ours (PermissionError): leave it


def _make_partial(out_dir: Path) -> Path:
    tmp = Path(
        tempfile.mkdtemp(prefix=f".{out_dir.name}.partial-{os.getpid()}-", dir=out_dir.parent)
    )
    # mkdtemp makes the folder private (0700); give it the usual permissions.
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o777 & ~umask)
    return tmp


def _install(tmp: Path, out_dir: Path) -> None:
    """Rename the finished tmp folder onto out_dir, replacing an old one."""
    if not out_dir.exists():
        try:
            os.replace(tmp, out_dir)
            return
        except OSError as exc:
            # Another process installed its copy between the check and the rename.
            if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                raise
    # rename() cannot replace a non-empty folder: move the old one aside,
    # put the new one in place, then delete the old one.
    old = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.old-", dir=out_dir.parent))
    os.replace(out_dir, old / out_dir.name)
    try:
        os.replace(tmp, out_dir)
    except BaseException:
        os.replace(old / out_dir.name, out_dir)  # put the previous data back
        raise
    shutil.rmtree(old, ignore_errors=True)


def prepare(
    dataset: str,
    tokenizer: str,
    out_dir: Path,
    *,
    token_cap: int = 0,
    val_fraction: float = 0.1,
    custom_path: str | None = None,
    bpe_vocab_size: int | None = None,
) -> Path:
    """Tokenize dataset into out_dir (train.bin, val.bin, meta.json); returns out_dir.

    The validation split is the dataset's own where it has one (then capped
    at token_cap * val_fraction tokens when token_cap is set), else the last
    val_fraction of the tokens. token_cap > 0 stops reading once the train
    split (or, when splitting by fraction, the whole stream) has that many
    tokens. GPT-2 and BPE streams end every document with <|endoftext|>. The
    bpe tokenizer (bpe_vocab_size tokens) is trained first, on the training
    text only; without a dataset split the split is then made in text (see
    lib/data/tokenizers/bpe.py).
    """
    _check_args(dataset, tokenizer, token_cap, val_fraction, bpe_vocab_size)
    out_dir = Path(out_dir).resolve()
    source = open_source(dataset, custom_path)  # fails before any file is made
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale_partials(out_dir)
    tmp = _make_partial(out_dir)
    try:
        fields = _write_splits(source, tokenizer, tmp, token_cap, val_fraction, bpe_vocab_size)
        meta = {
            "format_version": FORMAT_VERSION,
            "dataset": dataset,
            "source": source.origin,
            **fields,
            "token_cap": token_cap,
            "val_fraction": val_fraction,
            "created": datetime.now(UTC).isoformat(timespec="seconds"),
        }
        (tmp / META_NAME).write_text(
            json.dumps(meta, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
        )
        _install(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out_dir


# --- reading back ----------------------------------------------------------------
