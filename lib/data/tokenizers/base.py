"""The Tokenizer interface: what the data pipeline and the sampler need."""

from __future__ import annotations

import abc
from collections.abc import Sequence
from pathlib import Path
from typing import Any


class Tokenizer(abc.ABC):
    """Text <-> token ids, and a JSON-able record to rebuild it from (meta.json)."""

    name: str
    vocab_size: int
    eot_token: int | None

    @classmethod
    @abc.abstractmethod
    def from_meta(cls, meta: dict[str, Any]) -> Tokenizer:
        """The tokenizer that to_meta() described."""

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

    def save_files(self, folder: Path) -> None:  # noqa: B027  (optional: most write none)
        """Write files the tokenizer needs beside the prepared data (BPE: tokenizer.json);
        none by default."""

    def hf_tokenizer(self) -> Any:
        """The same ids as a Hugging Face `tokenizers.Tokenizer`, which `make export`
        writes as tokenizer.json; None where published files serve instead (GPT-2's)."""
        return None
