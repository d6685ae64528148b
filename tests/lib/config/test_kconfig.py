"""Strict loading: every way kconfiglib would bend a value is an error."""

from __future__ import annotations

import kconfiglib
import pytest

from lib.config.kconfig import ConfigError, float_bounds, load_strict, open_tree


def problems_of(path) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load_strict(path)
    return info.value.problems


def test_kconfig_tree_parses_without_warnings():
    assert open_tree().warnings == []


def test_out_of_range_int_is_rejected_with_range(write_config):
    path = write_config("CONFIG_BATCH_SIZE=99999")
    [problem] = problems_of(path)
    assert "test.config:1" in problem and "CONFIG_BATCH_SIZE=99999" in problem
    assert "allowed: 1 to 2048" in problem


def test_valid_int_in_range_is_kept(write_config):
    kconf = load_strict(write_config("CONFIG_BATCH_SIZE=16"))
    assert kconf.syms["BATCH_SIZE"].str_value == "16"


@pytest.mark.parametrize(
    "value, expect", [("6e-4x", "is not a number"), ("-1", "out of range"), ("nan", "out of range")]
)
def test_malformed_or_out_of_range_float_is_rejected(write_config, value, expect):
    [problem] = problems_of(write_config("# lr", f'CONFIG_LEARNING_RATE="{value}"'))
    assert "test.config:2" in problem and "CONFIG_LEARNING_RATE" in problem
    assert expect in problem and "1e-08 to 10" in problem


def test_unknown_symbol_is_rejected_with_suggestion(write_config):
    [problem] = problems_of(write_config("CONFIG_BATCH_SIZ=16"))
    assert "CONFIG_BATCH_SIZ=16" in problem and "unknown symbol" in problem
    assert "did you mean CONFIG_BATCH_SIZE" in problem


def test_unmet_dependency_is_rejected_naming_it(write_config):
    path = write_config("CONFIG_GPT2_MODEL_124M=y", "CONFIG_GPT2_N_LAYER=6")
    [problem] = problems_of(path)
    assert "test.config:2" in problem and "CONFIG_GPT2_N_LAYER=6" in problem
    assert "depends on GPT2_MODEL_CUSTOM" in problem and "GPT2_MODEL_CUSTOM=n" in problem


def test_malformed_line_is_rejected_with_line_number(write_config):
    [problem] = problems_of(write_config("CONFIG_BATCH_SIZE=16", "this is not config"))
    assert "test.config:2" in problem and "malformed" in problem


def test_derived_symbol_cannot_be_set_directly(write_config):
    [problem] = problems_of(write_config('CONFIG_GPT2_DATASET="finewebedu"'))
    assert "no prompt" in problem and "GPT2_DATASET_FINEWEBEDU" in problem


def test_two_members_of_one_choice_is_an_error(write_config):
    [problem] = problems_of(write_config("CONFIG_DEVICE_CPU=y", "CONFIG_DEVICE_CUDA=y"))
    assert "CONFIG_DEVICE_CPU=y" in problem and "exactly one of" in problem


def test_all_problems_are_reported_together(write_config):
    path = write_config("CONFIG_BATCH_SIZE=0", 'CONFIG_WEIGHT_DECAY="x"', "CONFIG_NOPE=1")
    assert len(problems_of(path)) == 3


def test_every_string_symbol_that_holds_a_number_declares_bounds():
    kconf = open_tree()
    for sym in kconf.unique_defined_syms:
        if sym.orig_type == kconfiglib.STRING:
            try:
                float(sym.str_value)
            except ValueError:
                continue
            assert float_bounds(sym), f"{sym.name} holds a number but has no 'Allowed X to Y'"


def test_a_byte_order_mark_is_accepted(tmp_path):
    path = tmp_path / "bom.config"
    path.write_bytes("\ufeffCONFIG_BATCH_SIZE=16\n".encode("utf-8"))
    assert load_strict(path).syms["BATCH_SIZE"].str_value == "16"


def test_a_byte_that_is_not_utf8_is_one_error_naming_file_and_line(tmp_path):
    path = tmp_path / "latin1.config"
    path.write_bytes(b"CONFIG_BATCH_SIZE=16\n# caf\xe9 au lait\n")
    [problem] = problems_of(path)
    assert problem.startswith(f"{path}:2: byte 0xe9 (column 6) is not UTF-8 text")


def test_a_malformed_line_is_an_error_not_a_warning(write_config):
    path = write_config("CONFIG_BATCH_SIZE=16", "CONFIG_GPT2_MAX_ITERS 20")
    [problem] = problems_of(path)
    assert problem.startswith(f"{path}:2: malformed line 'CONFIG_GPT2_MAX_ITERS 20': expected")
    assert "warning" not in problem and "ignoring" not in problem
