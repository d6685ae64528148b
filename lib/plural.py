"""Counts in messages: "1 run", "2 runs", never "1 runs" (one place for it)."""

from __future__ import annotations


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """`n` and the noun, singular for exactly one: counted(1, "run") -> "1 run",
    counted(3, "run") -> "3 runs"; `plural` for irregular nouns ("matrices")."""
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"


def with_article(word: str) -> str:
    """ "a str", "an int", "an Optimizer": the article by the word's first letter."""
    return f"{'an' if word[:1].lower() in 'aeiou' else 'a'} {word}"
