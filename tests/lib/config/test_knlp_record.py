"""The knlp check's record and the README section generated from it."""

from __future__ import annotations

import pytest

from lib.knlpcheck.record import BEGIN, END, make_record, render_section, replace_section


def test_record_counts_and_features_come_from_the_rows():
    rows = [
        ("gpt2-a", "loaded", ""),
        ("gpt2-b", "refused", "RGSA (ENABLE_RGSA)"),
        ("gpt2-c", "refused", "RGSA (ENABLE_RGSA) | mechint (KNLP_MECHINT; its own)"),
        ("gpt2-d", "mismatch", "LEARNING_RATE: 6e-4 there, 3e-4 here"),
    ]
    record = make_record("041ec5f2760abc6f", rows)
    assert record["counts"] == {"loaded": 1, "refused": 2, "mismatch": 1, "unchecked": 0}
    assert record["refused_for"] == {"RGSA (ENABLE_RGSA)": 2, "mechint (KNLP_MECHINT; its own)": 1}
    section = render_section(record, "docs/bench-data/knlp/check_041ec5f2.json")
    assert (
        "At knlp `041ec5f2`, 4 GPT-2 defconfigs: **1 load (25.0 %)**, 2 refused, 1 with" in section
    )
    assert "| RGSA (ENABLE_RGSA) | 2 |" in section.splitlines()
    assert "not checked" not in section  # said only where an older tree left some
    older = make_record("abc", [*rows, ("gpt2-e", "unchecked", "no GPT2_MAX_ITERS")])
    assert ", 1 not checked (" in render_section(older, "x.json")


def test_the_section_replaces_only_what_is_between_the_markers():
    readme = f"# kconfig-llm\n\nbefore\n{BEGIN}\nold figures\n{END}\nafter\n"
    section = render_section(make_record("abc", [("f", "loaded", "")]), "x.json")
    out = replace_section(readme, section)
    assert out.startswith("# kconfig-llm\n\nbefore\n") and out.endswith("\nafter\n")
    assert "old figures" not in out and "**1 load (100.0 %)**" in out
    with pytest.raises(ValueError, match="markers"):
        replace_section("# no markers\n", section)
