"""The character tokenizer: one id per character of the training text, as
nanoGPT's shakespeare_char. Its vocabulary is stored in meta.json so the same
ids come back when it is rebuilt."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lib.data.tokenizers.base import Tokenizer


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

    @classmethod
    def from_meta(cls, meta: dict[str, Any]) -> CharTokenizer:
        if "chars" not in meta:
            raise ValueError("char tokenizer meta has no 'chars' list")
        return cls(meta["chars"])

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

    def hf_tokenizer(self) -> Any:
        """Each character one token (a character outside the vocabulary is an error,
        as in encode), decoded by joining them."""
        from tokenizers import Regex, decoders, models, pre_tokenizers
        from tokenizers import Tokenizer as HFTokenizer

        hf = HFTokenizer(models.WordLevel(self._stoi, unk_token=None))
        hf.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), "isolated")
        hf.decoder = decoders.Fuse()
        return hf

    def to_meta(self) -> dict[str, Any]:
        return {"name": self.name, "vocab_size": self.vocab_size, "chars": self.chars}
