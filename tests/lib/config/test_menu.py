"""The menuconfig '/' search: what its "No matches" line suggests (lib/config/menu.py)."""

from __future__ import annotations

import pytest

from lib.config.kconfig import open_tree
from lib.config.menu import no_match_text


@pytest.mark.parametrize(
    "typed, meant",
    [
        ("lerning_rate", "LEARNING_RATE"),  # a misspelling, typed in lower case
        ("CONFIG_BACTH_SIZE", "BATCH_SIZE"),  # as it would be in .config
        ("gpt2_compile", "COMPILE_MODEL"),  # an old name: where it lives now
        ("GPT2_LOG_INTERVAL", "TRAIN_LOG_INTERVAL"),  # a knlp name
    ],
)
def test_a_name_that_matches_nothing_gets_the_symbol_it_meant(typed, meant):
    assert no_match_text(typed, open_tree()) == (
        f"No matches. Did you mean {meant}? Type its name to jump to it."
    )


@pytest.mark.parametrize("typed", ["qqqzzzxxx", ".*rate$", "peak rate"])
def test_no_suggestion_for_a_far_name_or_a_regex(typed):
    assert no_match_text(typed, open_tree()) == "No matches"
