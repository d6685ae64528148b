"""knlp files and checkouts older than the table's commit: settings of a feature
knlp has since removed are refused as one line per feature, and
scripts/check_knlp.sh says which files of an older checkout it cannot state
(a symbol its Kconfig lacks) or that the tree does not parse, instead of failing."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from lib.config.kconfig import ConfigError
from tests.lib.config.knlp_files import HEAD, loaded, stand_in_checkout


def test_settings_of_a_removed_feature_are_one_line_and_a_typo_keeps_its_hint(
    write_config,
) -> None:
    with pytest.raises(ConfigError) as err:
        loaded(
            write_config,
            "CONFIG_RA_MLA_USE_FLASH=n",
            "CONFIG_RA_MLA_LOG_METRICS=y",
            "CONFIG_RA_MLA_CACHE_Q_WINDOW=y",
            "CONFIG_GPT2_MAX_ITER=100",
        )
    problems = err.value.problems
    family = [p for p in problems if "RA_MLA_* settings" in p]
    assert len(family) == 1 and "lines 7, 8, 9: 3 RA_MLA_* settings" in family[0]
    assert "RA_MLA_USE_FLASH, RA_MLA_LOG_METRICS, RA_MLA_CACHE_Q_WINDOW" in family[0]
    typo = [p for p in problems if "GPT2_MAX_ITER=" in p]
    assert len(typo) == 1 and "did you mean CONFIG_GPT2_MAX_ITERS?" in typo[0]
    assert len(problems) == 2


def _checkout(tmp_path: Path, kconfig: str | None = None) -> Path:
    return stand_in_checkout(tmp_path / "knlp", {"plain": "\n".join(HEAD) + "\n"}, kconfig)


def test_a_checkout_lacking_a_symbol_the_check_reads_marks_the_file_unchecked(tmp_path) -> None:
    from lib.config.knlp.tree import render
    from lib.knlpcheck import check

    full = render()
    assert "1 loaded, 0 refused, 0 mismatch" in check.report(_checkout(tmp_path / "a", full))
    older = re.sub(r"config GPT2_MAX_ITERS\n(\t.*\n)+", "", full)
    out = check.report(_checkout(tmp_path / "b", older))
    assert "0 loaded, 0 refused, 0 mismatch, 1 unchecked" in out
    assert "has no GPT2_MAX_ITERS, which the check reads" in out


def test_a_tree_kconfiglib_cannot_parse_is_a_clear_error(tmp_path) -> None:
    from lib.knlpcheck import check

    root = _checkout(tmp_path, "config X\n\tbool\n\toutput yaml\n")
    with pytest.raises(ConfigError) as err:
        check.report(root)
    assert "does not parse with kconfiglib" in str(err.value)
