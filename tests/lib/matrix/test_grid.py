"""The grid: what the multiple-selection menus expand to, and what is refused."""

from __future__ import annotations

import pytest

from lib.config.kconfig import ConfigError, open_tree
from lib.config.run_config import load_run_config
from lib.matrix.grid import expand, is_multiple, one_run

OPT3 = {
    "OPTIMIZER_MODE": "multiple",
    "OPTIMIZER_ENABLE_ADAMW": "y",
    "OPTIMIZER_ENABLE_ADAMWSPAM": "y",
    "OPTIMIZER_ENABLE_ADAMWPRUNE": "y",
}


def ids(path, *args):
    return [p.run_id for p in expand(list(args), path)[1]]


def test_field_run_ids_and_invalid_pairs_removed(matrix_config):
    path = matrix_config(**OPT3, PRUNING_MODE="multiple")
    assert ids(path) == [
        "gpt2_adamw_none",
        "gpt2_adamw_magnitude_50",
        "gpt2_adamwspam_none",
        "gpt2_adamwspam_magnitude_50",
        "gpt2_adamwprune_bitter7_state_50",
    ]


def test_sparsities_variants_and_methods_multiply(matrix_config):
    path = matrix_config(
        **{**OPT3, "OPTIMIZER_ENABLE_ADAMWSPAM": "n"},
        PRUNING_MODE="multiple",
        PRUNING_ENABLE_MOVEMENT="y",
        PRUNING_SPARSITY_90="y",
        ADAMWPRUNE_ENABLE_BITTER0="y",
    )
    runs = ids(path)
    # adamw: dense + 2 methods x 2 sparsities; adamwprune: 2 variants x 2 sparsities
    assert len(runs) == 1 + 4 + 4 and len(set(runs)) == len(runs)
    assert "gpt2_adamw_movement_90" in runs and "gpt2_adamwprune_bitter0_state_90" in runs
    assert not any("adamwprune" in r and ("magnitude" in r or "movement" in r) for r in runs)
    assert not any(r.startswith("gpt2_adamw_") and "state" in r for r in runs)


def test_each_run_is_a_valid_single_configuration(matrix_config):
    path = matrix_config(**OPT3, PRUNING_MODE="multiple")
    for planned in expand([], path)[1]:
        run = planned.config
        assert not is_multiple(run) and run.OPTIMIZER_MODE == "single"
        assert (run.PRUNING_MODE == "single") == ("_none" not in planned.run_id)
        if run.OPTIMIZER == "adamwprune":
            assert run.PRUNING_METHOD == "state" and run.ADAMWPRUNE_VARIANT == "bitter7"


def test_attention_variants_are_a_dimension(matrix_config):
    path = matrix_config(
        GPT2_ATTENTION_MULTIPLE="y",
        GPT2_ATTENTION_ENABLE_MLA="y",
        GPT2_ATTENTION_ENABLE_RA_MLA="y",
        RA_MLA_LATENT_DIM="16",
    )
    assert ids(path) == ["gpt2_adamw_none", "gpt2_adamw_mla_none", "gpt2_adamw_ramla_none"]


def test_ablation_values_are_checked_and_named(matrix_config):
    path = matrix_config(MATRIX_ABLATION="LEARNING_RATE=1e-3,3e-3 GPT2_N_LAYER=1,2")
    runs = ids(path)
    assert len(runs) == 4 and "gpt2_adamw_none_learning_rate3e-3_gpt2_n_layer2" in runs
    bad = matrix_config(MATRIX_ABLATION="GPT2_N_LAYER=1,999")
    with pytest.raises(ConfigError, match=r"GPT2_N_LAYER=999.*range"):
        expand([], bad)


def test_an_enabled_value_that_no_run_uses_is_an_error(matrix_config):
    # AdamWPrune enabled, but only magnitude pruning: AdamWPrune would get no run.
    path = matrix_config(
        **OPT3, PRUNING_MODE="multiple", PRUNING_ENABLE_STATE="n", PRUNING_ENABLE_MAGNITUDE="y"
    )
    with pytest.raises(ConfigError, match="optimizer adamwprune is enabled but no run uses it"):
        expand([], path)


def test_command_line_overrides_apply_to_every_run(matrix_config):
    path = matrix_config(**OPT3, PRUNING_MODE="multiple")
    base, planned = expand(["MAX_ITERS=10"], path)
    assert base.overrides == {"MAX_ITERS": "10"}
    assert {p.config.GPT2_MAX_ITERS for p in planned} == {10}
    with pytest.raises(ConfigError, match="PRUNING_RAMP_END=8 is past CONFIG_GPT2_MAX_ITERS=6"):
        expand(["MAX_ITERS=6"], path)


def test_menuconfig_never_offers_an_invalid_pair():
    kconf = open_tree()
    kconf.syms["OPTIMIZER_MODE_MULTIPLE"].set_value(2)
    kconf.syms["OPTIMIZER_ENABLE_ADAMWPRUNE"].set_value(0)
    kconf.syms["PRUNING_MODE_MULTIPLE"].set_value(2)
    assert kconf.syms["PRUNING_ENABLE_STATE"].visibility == 0
    assert kconf.syms["PRUNING_ENABLE_MAGNITUDE"].visibility == 2
    kconf.syms["OPTIMIZER_ENABLE_ADAMW"].set_value(0)
    kconf.syms["OPTIMIZER_ENABLE_ADAMWPRUNE"].set_value(2)
    assert kconf.syms["PRUNING_ENABLE_STATE"].visibility == 2
    assert kconf.syms["PRUNING_ENABLE_MAGNITUDE"].visibility == 0
    # AdamWPrune dense (its base optimizer) is offered, but its default stays pruned
    kconf.named_choices["PRUNING_MODE"].unset_value()
    assert kconf.syms["PRUNING_MODE_NONE"].visibility == 2
    assert kconf.named_choices["PRUNING_MODE"].selection.name == "PRUNING_MODE_SINGLE"


def test_adamwprune_dense_cell_only_when_asked(matrix_config):
    path = matrix_config(**OPT3, PRUNING_MODE="multiple", PRUNING_ENABLE_NONE_ADAMWPRUNE="y")
    base, planned = expand([], path)
    assert [p.run_id for p in planned] == [
        "gpt2_adamw_none",
        "gpt2_adamw_magnitude_50",
        "gpt2_adamwspam_none",
        "gpt2_adamwspam_magnitude_50",
        "gpt2_adamwprune_none",
        "gpt2_adamwprune_bitter7_state_50",
    ]
    dense = planned[4].config
    assert (dense.OPTIMIZER, dense.PRUNING_MODE, dense.ADAMWPRUNE_BASE) == (
        "adamwprune",
        "none",
        "adamw",
    )
    # PRUNING_MODE_NONE in a matrix asks for AdamWPrune dense too
    path = matrix_config(**OPT3, PRUNING_MODE="none")
    assert ids(path) == ["gpt2_adamw_none", "gpt2_adamwspam_none", "gpt2_adamwprune_none"]


def test_pruning_settings_apply_to_their_method_only(matrix_config):
    path = matrix_config(
        **OPT3,
        PRUNING_MODE="multiple",
        PRUNING_ENABLE_MOVEMENT="y",
        MATRIX_PRUNING_SETTINGS="movement:PRUNING_SCHEDULE_LINEAR=y,PRUNING_MOVEMENT_KNLP=y",
    )
    runs = {p.run_id: p.config for p in expand([], path)[1]}
    assert runs["gpt2_adamw_movement_50"].PRUNING_SCHEDULE == "linear"
    assert runs["gpt2_adamw_movement_50"].PRUNING_MOVEMENT_KNLP
    assert runs["gpt2_adamw_magnitude_50"].PRUNING_SCHEDULE == "cubic"
    assert not runs["gpt2_adamw_magnitude_50"].PRUNING_MOVEMENT_KNLP
    path = matrix_config(
        **OPT3,
        PRUNING_MODE="multiple",
        MATRIX_PRUNING_SETTINGS="movement:PRUNING_SCHEDULE_LINEAR=y",
    )
    with pytest.raises(ConfigError, match="'movement' is not an enabled pruning method"):
        expand([], path)


def test_one_run_commands_refuse_a_multiple_selection(matrix_config):
    path = matrix_config(**OPT3, PRUNING_MODE="multiple")
    assert is_multiple(load_run_config([], path))
    with pytest.raises(
        ConfigError,
        match=r"this .config asks for several optimizers \(OPTIMIZER_MODE_MULTIPLE\), several "
        r"pruning settings \(PRUNING_MODE_MULTIPLE\), which `make estimate` cannot do in one "
        "run: `make test-matrix`",
    ):
        one_run(load_run_config([], path), "make estimate")
    single = matrix_config(OPTIMIZER_MODE="single")
    assert one_run(load_run_config([], single), "make").OPTIMIZER == "adamw"


def test_sgd_adam_and_adamwadv_are_matrix_optimizers_with_mask_pruning(matrix_config):
    path = matrix_config(
        OPTIMIZER_MODE="multiple",
        OPTIMIZER_ENABLE_ADAMW="n",
        OPTIMIZER_ENABLE_SGD="y",
        OPTIMIZER_ENABLE_ADAM="y",
        OPTIMIZER_ENABLE_ADAMWADV="y",
        PRUNING_MODE="multiple",
    )
    planned = expand([], path)[1]
    assert [p.run_id for p in planned] == [
        f"gpt2_{o}_{m}" for o in ("sgd", "adam", "adamwadv") for m in ("none", "magnitude_50")
    ]
    sgd = planned[0].config
    assert (sgd.OPTIMIZER, sgd.SGD_MOMENTUM, sgd.ADAM_AMSGRAD) == ("sgd", 0.9, None)
