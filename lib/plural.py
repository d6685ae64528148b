"""Counts in messages: "1 run", "2 runs", never "1 runs" (one place for it)."""

from __future__ import annotations


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """`n` and the noun, singular for exactly one: counted(1, "run") -> "1 run",
    counted(3, "run") -> "3 runs"; `plural` for irregular nouns ("matrices")."""
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"


def with_article(word: str) -> str:
    """The word with "a" or "an" by the sound it starts with: an int, a str, an 8-step,
    an 11-step, a 100-step (a number's as it is read: eight, eleven, eighteen)."""
    digits = word[: len(word) - len(word.lstrip("0123456789"))]
    if digits:
        vowel = digits[0] == "8" or (digits[:2] in ("11", "18") and len(digits) % 3 == 2)
    else:
        vowel = word[:1].lower() in "aeiou"
    return f"{'an' if vowel else 'a'} {word}"
