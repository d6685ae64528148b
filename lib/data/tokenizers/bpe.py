"""Byte-level BPE trained on the training split (Hugging Face tokenizers).

The third tokenizer: GPT-2's byte-level scheme (every byte is a symbol, so
any text encodes; GPT-2's pre-tokenizer regex) with merges learnt from this
dataset's training text alone, up to DATA_BPE_VOCAB_SIZE tokens including
``<|endoftext|>``. It is saved as tokenizer.json in the prepared dataset
folder and embedded in meta.json (so checkpoints carry it and sampling needs
no data folder).

The tokenizer must never see validation text. A dataset with its own
validation split trains on its train split; any other is split in text, not
in tokens: the last val_fraction of the characters (cut at a line end) is
validation, and the tokenizer learns from the rest.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer as HFTokenizer
from tokenizers import decoders, models, pre_tokenizers, trainers

from lib.data.sources import DataError, Source
from lib.data.tokenizers.base import Tokenizer

EOT_TEXT = "<|endoftext|>"
FILE = "tokenizer.json"
MIN_VOCAB = 257  # the 256 byte symbols and <|endoftext|>
# With DATA_TOKEN_CAP set, read at most this many characters per capped token:
# the training text must be held in memory to learn the merges.
CHARS_PER_CAPPED_TOKEN = 8


class BPETokenizer(Tokenizer):
    name = "bpe"

    def __init__(self, hf: HFTokenizer, requested_vocab_size: int | None = None) -> None:
        hf.encode_special_tokens = True  # "<|endoftext|>" in a document is plain text
        self.hf = hf
        self.vocab_size = hf.get_vocab_size()
        self.eot_token = hf.token_to_id(EOT_TEXT)
        self.requested_vocab_size = requested_vocab_size or self.vocab_size

    @classmethod
    def train(cls, texts: Iterable[str], vocab_size: int) -> BPETokenizer:
        """Learn merges from texts, up to vocab_size tokens (fewer if the text runs out)."""
        if vocab_size < MIN_VOCAB:
            raise ValueError(
                f"a byte-level BPE needs at least {MIN_VOCAB} tokens "
                f"(256 bytes and {EOT_TEXT}), not {vocab_size}"
            )
        hf = HFTokenizer(models.BPE())
        hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        hf.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size,
            special_tokens=[EOT_TEXT],
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        )
        hf.train_from_iterator(texts, trainer)
        return cls(hf, vocab_size)

    @classmethod
    def from_meta(cls, meta: dict[str, Any]) -> BPETokenizer:
        text = meta.get("json")
        if not isinstance(text, str):
            raise ValueError("bpe tokenizer meta has no 'json' (the tokenizer.json text)")
        if "sha256" in meta and _sha256(text) != meta["sha256"]:
            raise ValueError("bpe tokenizer meta: the tokenizer text does not match its sha256")
        return cls(HFTokenizer.from_str(text), meta.get("requested_vocab_size"))

    def encode(self, text: str) -> list[int]:
        return self.hf.encode(text, add_special_tokens=False).ids

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        return [e.ids for e in self.hf.encode_batch(list(texts), add_special_tokens=False)]

    def decode(self, ids: Sequence[int]) -> str:
        return self.hf.decode([int(i) for i in ids], skip_special_tokens=False)

    def hf_tokenizer(self) -> HFTokenizer:
        return HFTokenizer.from_str(self.hf.to_str())

    def to_meta(self) -> dict[str, Any]:
        text = self.hf.to_str()
        return {
            "name": self.name,
            "vocab_size": self.vocab_size,
            "eot_token": self.eot_token,
            "requested_vocab_size": self.requested_vocab_size,
            "file": FILE,
            "sha256": _sha256(text),
            "json": text,
        }

    def save_files(self, folder: Path) -> None:
        (Path(folder) / FILE).write_text(self.hf.to_str(), encoding="utf-8")  # meta's sha256


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _capped(docs: Iterable[str], max_chars: int) -> Iterator[str]:
    total = 0
    for doc in docs:
        if max_chars and total >= max_chars:
            return
        yield doc[: max_chars - total] if max_chars else doc
        total += len(doc)


def split_text(docs: list[str], val_fraction: float) -> tuple[list[str], list[str]]:
    """(train, val) documents: val is the last val_fraction of the characters, the
    document holding the boundary cut just after a line end near it."""
    total = sum(len(d) for d in docs)
    boundary = int(total * (1.0 - val_fraction))
    seen = 0
    for i, doc in enumerate(docs):
        if seen + len(doc) > boundary:
            at = boundary - seen
            nl = doc.rfind("\n", 0, at)
            cut = nl + 1 if nl >= 0 else at
            head, tail = doc[:cut], doc[cut:]
            train, val = docs[:i] + ([head] if head else []), [tail] + docs[i + 1 :]
            if not train or not "".join(val).strip():
                break
            return train, val
        seen += len(doc)
    raise DataError(
        f"Only {total} characters: too few to hold out a validation share of {val_fraction}."
    )


def bpe_streams(
    source: Source, vocab_size: int, token_cap: int, val_fraction: float
) -> tuple[BPETokenizer, dict[str, Iterable[str]], str]:
    """Train the tokenizer on the training text; (tokenizer, split streams, val_from)."""
    train = list(_capped(source.documents("train"), CHARS_PER_CAPPED_TOKEN * token_cap))
    if source.has_val_split:
        val: Iterable[str] = source.documents("val")
        val_from = "dataset validation split"
    else:
        train, val = split_text(train, val_fraction)
        val_from = f"last {val_fraction} of the text, cut at a line end"
    return BPETokenizer.train(train, vocab_size), {"train": train, "val": val}, val_from
