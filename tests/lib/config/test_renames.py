"""Old and the original project's symbol names load as the current symbols."""

from __future__ import annotations

import pytest

from lib.config.kconfig import ConfigError, load_strict
from lib.config.renames import RENAMED, rewrite
from lib.config.run_config import load_run_config, write_outputs

# The three configuration blocks of the original project's GPT-2 baseline
# guide (knlp docs/gpt2_baseline.md, "Option 1-3"), line for line as written.
BASELINE_OPTIONS = {
    "option1": [
        "CONFIG_BATCH_SIZE=32",
        "CONFIG_GPT2_GRADIENT_ACCUMULATION=4",
        "CONFIG_GPT2_COMPILE=y",
        "CONFIG_COMPILE_MODEL=y",
    ],
    "option2": [
        "CONFIG_BATCH_SIZE=32",
        "CONFIG_GPT2_GRADIENT_ACCUMULATION=4",
        "CONFIG_GPT2_COMPILE=n",
        "CONFIG_COMPILE_MODEL=n",
    ],
    "option3": [
        "CONFIG_BATCH_SIZE=16",
        "CONFIG_GPT2_GRADIENT_ACCUMULATION=8  # Keep effective batch = 128",
        "CONFIG_GPT2_COMPILE=n",
    ],
}
EXPECTED = {"option1": (32, 4, True), "option2": (32, 4, False), "option3": (16, 8, False)}


@pytest.mark.parametrize("option", sorted(BASELINE_OPTIONS))
def test_original_baseline_blocks_load_as_written(tmp_path, write_config, option):
    path = write_config(
        "CONFIG_MODEL_GPT2=y", "CONFIG_GPT2_MODEL_124M=y", *BASELINE_OPTIONS[option]
    )
    write_outputs(load_strict(path), tmp_path / ".config", tmp_path / "config.py")
    run = load_run_config([], tmp_path / ".config")
    assert (run.BATCH_SIZE, run.GPT2_GRADIENT_ACCUMULATION, run.COMPILE_MODEL) == EXPECTED[option]
    assert "GPT2_COMPILE" not in (tmp_path / ".config").read_text()  # saved under the new name


def test_two_names_with_different_values_name_both_lines(write_config):
    path = write_config("CONFIG_COMPILE_MODEL=y", "CONFIG_BATCH_SIZE=8", "CONFIG_GPT2_COMPILE=n")
    with pytest.raises(ConfigError) as info:
        load_strict(path)
    [problem] = info.value.problems
    assert "test.config:3" in problem and "CONFIG_COMPILE_MODEL=y on line 1" in problem


def test_errors_after_a_renamed_line_keep_their_line_numbers(write_config):
    path = write_config("# CONFIG_HAMT_COMPILE is not set", "CONFIG_BATCH_SIZE=99999")
    with pytest.raises(ConfigError) as info:
        load_strict(path)
    assert "test.config:2" in str(info.value)


def test_trailing_comment_is_dropped_only_after_unquoted_values():
    text, problems = rewrite('CONFIG_A=8  # note\nCONFIG_B="x # y"\nCONFIG_C="z"  # note\n', "f")
    assert problems == [] and text.splitlines() == [
        "CONFIG_A=8",
        'CONFIG_B="x # y"',
        'CONFIG_C="z"  # note',
    ]


# A value other than the default for each symbol an old name stands for, and
# what must be set first for it to be visible.
OTHER_VALUE = {
    "COMPILE_MODEL": ("y", True, ""),
    "ADAM_BETA1": ("0.8", 0.8, ""),
    "ADAM_BETA2": ("0.999", 0.999, ""),
    "ADAM_EPSILON": ("1e-6", 1e-6, ""),
    "WEIGHT_DECAY": ("0.05", 0.05, ""),
    "GPT2_ATTENTION_RA_LOGIT": ("y", True, ""),
    "GPT2_ATTENTION_RA_GATED": ("y", True, ""),
    "GPT2_ATTENTION_SDPA_GATE": ("y", True, ""),
    "GPT2_ATTENTION_ENABLE_RA_LOGIT": ("y", True, "GPT2_ATTENTION_MULTIPLE=y"),
    "GPT2_RA_GATED_LAYERS": ("2", 2, "GPT2_ATTENTION_RA_GATED=y"),
    "GPT2_RA_GATED_HEADS": ("2", 2, "GPT2_ATTENTION_RA_GATED=y"),
    "TRAIN_LOG_INTERVAL": ("7", 7, ""),
    "TRAIN_MAX_TIME": ("60", 60, ""),
    "TRAIN_EVAL_ITERS": ("7", 7, ""),
    "GPT2_TIE_HEAD": ("n", False, ""),
    "TF32": ("y", True, ""),
}


@pytest.mark.parametrize("old", sorted(RENAMED))
def test_every_old_name_works_as_an_override(dot_config, old):
    new = RENAMED[old]
    text, want, context = OTHER_VALUE[new]
    before = load_run_config([f"SET={context}"] if context else [], dot_config)
    assert getattr(before, new) != want
    run = load_run_config([f"SET={context} {old}={text}"], dot_config)
    assert getattr(run, new) == pytest.approx(want)


def test_spaces_around_equals_are_reported_at_their_line_without_a_did_you_mean(write_config):
    path = write_config("CONFIG_BATCH_SIZE=8", "CONFIG_GPT2_MAX_ITERS = 50")
    with pytest.raises(ConfigError) as info:
        load_strict(path)
    [problem] = info.value.problems
    assert "test.config:2" in problem and "CONFIG_GPT2_MAX_ITERS=50 (no spaces)" in problem
    assert "did you mean" not in problem


def test_one_name_twice_with_the_same_value_loads(tmp_path, write_config):
    path = write_config("CONFIG_GPT2_COMPILE=n", "CONFIG_BATCH_SIZE=8", "CONFIG_GPT2_COMPILE=n")
    write_outputs(load_strict(path), tmp_path / ".config", tmp_path / "config.py")
    run = load_run_config([], tmp_path / ".config")
    assert (run.COMPILE_MODEL, run.BATCH_SIZE) == (False, 8)


def test_one_name_twice_with_different_values_names_both_lines(write_config):
    path = write_config("CONFIG_BATCH_SIZE=8", "CONFIG_GPT2_MAX_ITERS=50", "CONFIG_BATCH_SIZE=16")
    with pytest.raises(ConfigError) as info:
        load_strict(path)
    [problem] = info.value.problems
    assert "test.config:3" in problem and "CONFIG_BATCH_SIZE=8 on line 1" in problem
