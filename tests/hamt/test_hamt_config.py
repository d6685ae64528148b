"""HAMTConfig validation: each bad value names its field, value and range."""

from __future__ import annotations

import pytest

import hamt
from hamt.config import HAMTConfig
from lib.config import run_config_from_defaults
from lib.kconfig import ConfigError


def test_defaults():
    cfg = HAMTConfig(vocab_size=101)
    assert (cfg.block_size, cfg.n_layer, cfg.n_embd, cfg.num_slots) == (256, 4, 128, 16)
    assert cfg.binding == "circular" and cfg.hcm_dim == 256
    assert HAMTConfig(vocab_size=101, hcm_mult=3, n_embd=32).hcm_dim == 96


def test_vocab_size_is_required():
    with pytest.raises(TypeError):
        HAMTConfig()  # type: ignore[call-arg]


@pytest.mark.parametrize(
    "field, value, allowed",
    [
        ("vocab_size", 0, ">= 1"),
        ("n_layer", True, ">= 1"),
        ("chunk_size", 0, ">= 1"),
        ("slow_every", 0, ">= 1"),
        ("aux_max_lag", 0, ">= 1"),
        ("num_slots", 3, "4 to 64"),
        ("num_slots", 65, "4 to 64"),
        ("hcm_mult", 0, "1 to 8"),
        ("hcm_mult", 9, "1 to 8"),
        ("binding", "fft", "circular, elementwise"),
        ("aux_weight", -0.1, "[0, 1]"),
        ("aux_weight", 1.5, "[0, 1]"),
        ("decay_init", 0.0, "(0, 1)"),
        ("decay_init", 1.0, "(0, 1)"),
        ("dropout", 1.0, "[0, 1)"),
        ("hierarchical", 1, "True or False"),
        ("bias", "yes", "True or False"),
    ],
)
def test_invalid_values_name_field_value_and_range(field, value, allowed):
    with pytest.raises(ValueError) as err:
        HAMTConfig(**{"vocab_size": 101, field: value})
    message = str(err.value)
    assert message.startswith(f"{field}={value!r}") or message.startswith(f"{field}={value}")
    assert allowed in message


def test_boundaries_are_accepted():
    HAMTConfig(vocab_size=101, num_slots=4, hcm_mult=8, aux_weight=1, decay_init=0.999,
               binding="elementwise", hierarchical=True, chunk_size=1)
    HAMTConfig(vocab_size=101, num_slots=64, hcm_mult=1, aux_weight=0.0)


def test_width_must_divide_into_heads():
    with pytest.raises(ValueError, match="n_embd=30 is not divisible by n_head=4"):
        HAMTConfig(vocab_size=101, n_embd=30)


def test_odd_hcm_dim_is_rejected():
    with pytest.raises(ValueError, match="hcm_dim=9"):
        HAMTConfig(vocab_size=101, n_embd=9, n_head=1, hcm_mult=1)


def test_slow_every_is_read_only_with_the_hierarchical_memory():
    run = run_config_from_defaults({"MODEL_HAMT": "y", "HAMT_HIERARCHICAL": "y",
                                    "HAMT_SLOW_EVERY": "4", "HAMT_AUX_MAX_LAG": "64"})
    cfg = hamt.from_run_config(run, 101)
    assert (cfg.hierarchical, cfg.slow_every, cfg.aux_max_lag) == (True, 4, 64)
    with pytest.raises(ConfigError, match="HAMT_SLOW_EVERY"):  # hidden without the banks
        run_config_from_defaults({"MODEL_HAMT": "y", "HAMT_SLOW_EVERY": "4"})
