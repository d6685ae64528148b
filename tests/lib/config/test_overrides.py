"""Command-line overrides (lib/config/overrides.py): a refused one is reported as the
override it is, with a long value cut, never as a problem of .config."""

from __future__ import annotations

import re

import pytest

from lib.config.kconfig import ConfigError
from lib.config.run_config import load_run_config

LONG = "7" * 5000  # a value pasted by mistake


@pytest.mark.parametrize(
    "arg",
    [
        f"MAX_ITERS={LONG}",  # int: out of range
        f"SET=TRAIN_SEED=x{LONG}",  # int: not an integer
        f"LR=x{LONG}",  # float
        f"DEVICE={LONG}",  # choice
        f"COMPILE={LONG}",  # bool
        f"NOT_A_SYMBOL={LONG}",  # unknown name
        f"{LONG}=1",  # unknown name, long itself
        f"DRY_RUN={LONG}",  # flag
        f"TRACKER={LONG}",  # tracker names
        f"TUNE=x{LONG}",  # the tuned symbols' words (lib/tune/space.py)
        f"SCALE_ITERS={LONG}",
        f"x{LONG}",  # no NAME=VALUE
    ],
)
def test_a_long_value_is_shown_cut_with_its_length(dot_config, arg):
    with pytest.raises(ConfigError) as refused:
        load_run_config([arg], dot_config)
    message = str(refused.value)
    assert re.search(r"… \(5,00[01] characters\)", message), message
    assert not re.search(r"[7x]{41}", message), message  # nowhere in full
    assert len(message) < 700, message


def test_a_bad_tracker_is_a_command_line_error_not_a_dot_config_one(dot_config):
    with pytest.raises(ConfigError) as refused:
        load_run_config(["TRACKER=mlflow"], dot_config)
    header, problem = str(refused.value).splitlines()
    assert header == "invalid configuration (command-line overrides):"
    assert problem.startswith("  - override TRACKER=mlflow (make command line): unknown tracker")
    assert str(dot_config) not in str(refused.value)


def test_a_flag_or_a_malformed_word_is_a_command_line_error_too(dot_config):
    for arg in ("DRY_RUN=maybe", "MAX_ITERS"):
        with pytest.raises(ConfigError, match=r"^invalid configuration \(command-line overrides\)"):
            load_run_config([arg], dot_config)


@pytest.mark.parametrize("value", [" 300", "+300", "3_00", "٣٠٠"])
def test_an_int_in_dot_config_is_kconfigs_syntax_too(dot_config, value):
    """kconfiglib reads every one of these as 300 (Python's int()); Kconfig does not."""
    text = dot_config.read_text()
    assert "CONFIG_GPT2_MAX_ITERS=300\n" in text
    dot_config.write_text(
        text.replace("CONFIG_GPT2_MAX_ITERS=300\n", f"CONFIG_GPT2_MAX_ITERS={value}\n")
    )
    with pytest.raises(ConfigError) as refused:
        load_run_config([], dot_config)
    [problem] = refused.value.problems
    assert (
        f"CONFIG_GPT2_MAX_ITERS={value} was not applied (Kconfig's own tools refuse it): "
        "not an integer; allowed: 1 to 100000000" in problem
    )


def test_a_value_split_at_a_blank_inside_set_says_why():
    """SET="X=betas=(0.9, 0.99)" reaches the parser as two words; the second is no
    NAME=VALUE, and the refusal says that SET= splits at blanks."""
    from lib.config.overrides import split_args

    _, _, problems = split_args(["SET=OPTIMIZER_CUSTOM_KWARGS=betas=(0.9, 0.99)"])
    [problem] = problems
    assert problem.startswith("override '0.99)' is not NAME=VALUE"), problem
    assert "SET= splits at blanks" in problem and "betas=(0.9,0.99)" in problem, problem
    assert split_args(["MAX_ITERS"])[2] == ["override 'MAX_ITERS' is not NAME=VALUE"]
