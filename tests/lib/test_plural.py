"""Counts in messages agree with their number: "1 run", "2 runs", never "1 runs"."""

from __future__ import annotations

import pytest

from lib.config.run_config import load_run_config
from lib.plural import counted


@pytest.mark.parametrize(
    "n, noun, plural, expect",
    [
        (0, "run", None, "0 runs"),
        (1, "run", None, "1 run"),
        (2, "run", None, "2 runs"),
        (1, "evaluation", None, "1 evaluation"),
        (12345, "token", None, "12,345 tokens"),
        (1, "matrix", "matrices", "1 matrix"),
        (3, "matrix", "matrices", "3 matrices"),
    ],
)
def test_counted_is_singular_for_exactly_one(n, noun, plural, expect):
    assert counted(n, noun, plural) == expect


def test_a_run_with_one_evaluation_says_so(dot_config):
    # 20 steps, evaluated every 100: one evaluation, at the end
    run = load_run_config(["MAX_ITERS=20", "SET=GPT2_WARMUP_STEPS=2"], dot_config)
    assert "over 20 iterations, 1 evaluation" in run.describe()
    assert "1 evaluations" not in run.describe()
    one = load_run_config(["MAX_ITERS=1", "SET=GPT2_WARMUP_STEPS=0"], dot_config)
    assert "over 1 iteration, 1 evaluation" in one.describe()


@pytest.mark.parametrize(
    "word, said",
    [
        ("int", "an int"),
        ("str", "a str"),
        ("Optimizer", "an Optimizer"),
        ("8-step", "an 8-step"),
        ("11-step", "an 11-step"),
        ("18-step", "an 18-step"),
        ("80-step", "an 80-step"),
        ("100-step", "a 100-step"),
        ("1100-step", "a 1100-step"),
        ("18000-step", "an 18000-step"),
    ],
)
def test_the_article_follows_the_sound_a_word_starts_with(word, said):
    from lib.plural import with_article

    assert with_article(word) == said
