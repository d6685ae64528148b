"""MATRIX_OPTIMIZER_SETTINGS: each optimizer of a matrix with its own values, the
others keeping the shared ones; run ids unchanged; what is refused."""

from __future__ import annotations

import pytest

from lib.config.kconfig import ConfigError
from lib.matrix.grid import expand

THREE_OPTIMIZERS = {
    "OPTIMIZER_MODE": "multiple",
    "OPTIMIZER_ENABLE_ADAMW": "y",
    "OPTIMIZER_ENABLE_ADAMWSPAM": "y",
    "OPTIMIZER_ENABLE_SGD": "y",
    "WEIGHT_DECAY": "0.1",
}


def _by_optimizer(planned):
    return {p.config.OPTIMIZER: p for p in planned}


def test_each_optimizer_runs_with_its_own_values(matrix_config):
    path = matrix_config(
        **THREE_OPTIMIZERS,
        MATRIX_OPTIMIZER_SETTINGS="adamwspam:ADAM_AMSGRAD=y,WEIGHT_DECAY=0.05 sgd:SGD_MOMENTUM=0.5",
    )
    _, planned = expand([], path)
    runs = _by_optimizer(planned)
    assert sorted(runs) == ["adamw", "adamwspam", "sgd"]
    spam, adamw, sgd = runs["adamwspam"].config, runs["adamw"].config, runs["sgd"].config
    assert (spam.ADAM_AMSGRAD, spam.WEIGHT_DECAY) == (True, 0.05)
    assert (adamw.ADAM_AMSGRAD, adamw.WEIGHT_DECAY) == (False, 0.1)  # the shared values
    assert (sgd.SGD_MOMENTUM, sgd.WEIGHT_DECAY) == (0.5, 0.1)
    assert runs["adamwspam"].overrides[:4] == [
        ("OPTIMIZER_MODE", "single"),
        ("OPTIMIZER", "adamwspam"),
        ("ADAM_AMSGRAD", "y"),
        ("WEIGHT_DECAY", "0.05"),
    ]


def test_run_ids_and_overrides_stay_those_of_a_matrix_without_settings(matrix_config):
    _, plain = expand([], matrix_config(**THREE_OPTIMIZERS))
    _, own = expand(
        [], matrix_config(**THREE_OPTIMIZERS, MATRIX_OPTIMIZER_SETTINGS="sgd:SGD_MOMENTUM=0.5")
    )
    assert [p.run_id for p in own] == [p.run_id for p in plain]
    assert [p.run_id for p in plain] == ["gpt2_adamw_none", "gpt2_adamwspam_none", "gpt2_sgd_none"]
    # an optimizer without settings has exactly the overrides it had before
    assert [p.overrides for p in own][:2] == [p.overrides for p in plain][:2]
    assert own[2].overrides != plain[2].overrides


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("adamwspam", "is not optimizer:SYMBOL=value"),
        ("adamwspam:ADAM_AMSGRAD", "is not optimizer:SYMBOL=value"),
        ("adam:WEIGHT_DECAY=0", "'adam' is not an enabled optimizer"),
        ("sgd:SGD_MOMENTUM=0.5 sgd:WEIGHT_DECAY=0", "'sgd' is named twice"),
        ("sgd:OPTIMIZER=adamw", "sets which runs the matrix makes"),
        ("sgd:MATRIX_SEEDS=3", "sets which runs the matrix makes"),
    ],
)
def test_malformed_settings_are_refused_before_anything_runs(matrix_config, text, said):
    with pytest.raises(ConfigError) as err:
        expand([], matrix_config(**THREE_OPTIMIZERS, MATRIX_OPTIMIZER_SETTINGS=text))
    assert said in str(err.value)


def test_a_bad_value_is_checked_like_any_override(matrix_config):
    path = matrix_config(**THREE_OPTIMIZERS, MATRIX_OPTIMIZER_SETTINGS="sgd:SGD_MOMENTUM=lots")
    with pytest.raises(ConfigError) as err:
        expand([], path)
    assert "SGD_MOMENTUM" in str(err.value) and "sgd" in str(err.value)


def test_a_setting_of_the_seed_clashes_with_matrix_seeds(matrix_config):
    path = matrix_config(
        **THREE_OPTIMIZERS, MATRIX_SEEDS="2", MATRIX_OPTIMIZER_SETTINGS="sgd:TRAIN_SEED=5"
    )
    with pytest.raises(ConfigError) as err:
        expand([], path)
    assert "CONFIG_MATRIX_OPTIMIZER_SETTINGS sets TRAIN_SEED" in str(err.value)
