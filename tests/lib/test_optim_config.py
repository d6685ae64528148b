"""Optimizer and pruning choices: invalid pairs never load; run names follow the field."""
from __future__ import annotations

import pytest

from lib.config import load_run_config, write_outputs
from lib.kconfig import ConfigError, load_strict, open_tree
from lib.rundir import run_tag


def load(write_config, tmp_path, *lines):
    write_outputs(load_strict(write_config(*lines)), tmp_path / ".config", tmp_path / "config.py")
    return load_run_config([], tmp_path / ".config")


@pytest.mark.parametrize("lines, expect", [
    (["CONFIG_OPTIMIZER_ADAMWPRUNE=y", "CONFIG_PRUNING_MODE_SINGLE=y",
      "CONFIG_PRUNING_METHOD_MAGNITUDE=y"], "PRUNING_METHOD_MAGNITUDE=y was not applied"),
    (["CONFIG_PRUNING_MODE_SINGLE=y", "CONFIG_PRUNING_METHOD_STATE=y"],
     "OPTIM_HAS_ADAMWPRUNE is y if OPTIMIZER_ADAMWPRUNE"),
    (["CONFIG_OPTIMIZER_ADAMWPRUNE=y", "CONFIG_PRUNING_MODE_NONE=y"],
     "PRUNING_MODE_NONE=y was not applied"),
    (["CONFIG_OPTIMIZER_ADAMWSPAM=y", "CONFIG_ADAMWPRUNE_VARIANT_BITTER3=y"],
     "depends on PRUNING_METHOD_STATE"),
])
def test_invalid_optimizer_pruning_pairs_are_rejected(write_config, lines, expect):
    with pytest.raises(ConfigError, match=expect):
        load_strict(write_config(*lines))


def test_cross_symbol_rules_are_checked_at_load(write_config, tmp_path):
    with pytest.raises(ConfigError, match="PRUNING_RAMP_END=250 is past CONFIG_GPT2_MAX_ITERS=100"):
        load(write_config, tmp_path, "CONFIG_PRUNING_MODE_SINGLE=y",
             "CONFIG_PRUNING_METHOD_MAGNITUDE=y", "CONFIG_GPT2_MAX_ITERS=100")
    with pytest.raises(ConfigError, match="SPAM_WARMUP_STEPS=150 must be below CONFIG_SPAM_INTERVAL=100"):
        load(write_config, tmp_path, "CONFIG_OPTIMIZER_ADAMWSPAM=y", "CONFIG_SPAM_INTERVAL=100")


def test_adamwprune_defaults_to_state_pruning(write_config, tmp_path):
    run = load(write_config, tmp_path, "CONFIG_OPTIMIZER_ADAMWPRUNE=y")
    assert (run.PRUNING_MODE, run.PRUNING_METHOD, run.ADAMWPRUNE_VARIANT) == ("single", "state", "bitter7")
    assert run.ADAMWPRUNE_BASE == "adamw" and run.ADAMW_BETA2 == 0.95


@pytest.mark.parametrize("lines, tag", [
    ([], "gpt2_adamw_none"),
    (["CONFIG_OPTIMIZER_ADAMWSPAM=y", "CONFIG_PRUNING_MODE_SINGLE=y",
      "CONFIG_PRUNING_METHOD_MAGNITUDE=y"], "gpt2_adamwspam_magnitude_50"),
    (["CONFIG_OPTIMIZER_ADAMWPRUNE=y", 'CONFIG_PRUNING_TARGET_SPARSITY="0.7"'],
     "gpt2_adamwprune_bitter7_state_70"),
    (["CONFIG_PRUNING_MODE_SINGLE=y", "CONFIG_PRUNING_METHOD_MOVEMENT=y",
      'CONFIG_PRUNING_TARGET_SPARSITY="0.95"'], "gpt2_adamw_movement_95"),
])
def test_run_tags_follow_the_field_convention(write_config, tmp_path, lines, tag):
    assert run_tag(load(write_config, tmp_path, *(lines or ["# defaults"]))) == tag


def test_every_float_default_lies_within_its_bounds():
    from lib.kconfig import float_bounds
    for sym in open_tree().unique_defined_syms:
        bounds = float_bounds(sym)
        if bounds:
            assert bounds[0] <= float(sym.str_value or sym.defaults[0][0].str_value) <= bounds[1], sym.name
