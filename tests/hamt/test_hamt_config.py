"""HAMTConfig validation: each bad value names its field, value and range; read
from Kconfig, each HAMT symbol lands in its field and a bad value names the symbol."""

from __future__ import annotations

import re
from dataclasses import fields, replace

import pytest

import hamt
from hamt.config import HAMTConfig
from lib.config.kconfig import ConfigError, open_tree
from lib.config.run_config import SYMBOL_NAMES, run_config_from_defaults
from lib.model import registry

# A HAMT configuration with every symbol away from its default, so a field
# that ignored its symbol (or read another's) would show.
SETTINGS = {
    "MODEL_HAMT": "y",
    "GPT2_BLOCK_SIZE": "64",
    "HAMT_N_LAYER": "3",
    "HAMT_N_EMBD": "48",
    "HAMT_NUM_SLOTS": "8",
    "HAMT_HCM_MULT": "3",
    "HAMT_BINDING_ELEMENTWISE": "y",
    "HAMT_KEY_EPS": "1e-4",
    "HAMT_AUX_WEIGHT": "0.25",
    "HAMT_AUX_MAX_LAG": "48",
    "HAMT_DECAY_INIT": "0.95",
    "HAMT_HIERARCHICAL": "y",
    "HAMT_SLOW_EVERY": "4",
    "HAMT_ADAPTIVE_SLOTS": "y",
    "HAMT_ADAPTIVE_SLOTS_TOPK": "3",
    "HAMT_ADAPTIVE_SLOTS_BALANCE": "0.05",
    "HAMT_DROPOUT": "0.1",
    "HAMT_BIAS": "n",
    "HAMT_CHUNK_SIZE": "16",
    "HAMT_SCAN_BACKEND_TORCH": "y",
    "HAMT_KERNEL_PIN": "n",
}
EXPECTED = {
    "vocab_size": 101,
    "block_size": 64,
    "n_layer": 3,
    "n_head": 1,
    "n_embd": 48,
    "num_slots": 8,
    "hcm_mult": 3,
    "binding": "elementwise",
    "key_eps": 1e-4,
    "aux_weight": 0.25,
    "aux_max_lag": 48,
    "decay_init": 0.95,
    "hierarchical": True,
    "slow_every": 4,
    "adaptive_slots": True,
    "adaptive_slots_topk": 3,
    "adaptive_slots_balance": 0.05,
    "dropout": 0.1,
    "bias": False,
    "chunk_size": 16,
    "scan_backend": "torch",
    "kernel_pin": False,
}
# "num_slots=3": how HAMTConfig names a value; Kconfig users know only the symbols.
FIELD_STYLE = re.compile(r"\b(" + "|".join(f.name for f in fields(HAMTConfig)) + r")=")


def from_kconfig(run, vocab_size: int = 101) -> HAMTConfig:
    return registry.family("hamt").from_run_config(run, vocab_size)


def test_defaults():
    cfg = HAMTConfig(vocab_size=101)
    assert (cfg.block_size, cfg.n_layer, cfg.n_embd, cfg.num_slots) == (256, 4, 128, 16)
    assert cfg.binding == "circular" and cfg.hcm_dim == 256
    assert HAMTConfig(vocab_size=101, hcm_mult=3, n_embd=32).hcm_dim == 96


@pytest.mark.parametrize(
    "n_embd, hcm_mult, hcm_dim", [(8, 1, 8), (32, 3, 96), (128, 8, 1024), (48, 5, 240)]
)
def test_hcm_dim_is_n_embd_times_hcm_mult(n_embd, hcm_mult, hcm_dim):
    assert HAMTConfig(vocab_size=101, n_head=1, n_embd=n_embd, hcm_mult=hcm_mult).hcm_dim == hcm_dim


def test_vocab_size_is_required():
    with pytest.raises(TypeError, match="vocab_size"):
        HAMTConfig()  # type: ignore[call-arg]


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("vocab_size", 0, "vocab_size=0 is invalid: it must be an integer >= 1"),
        ("n_layer", True, "n_layer=True is invalid: it must be an integer >= 1"),
        ("n_embd", 64.0, "n_embd=64.0 is invalid: it must be an integer >= 1"),
        ("chunk_size", 0, "chunk_size=0 is invalid: it must be an integer >= 1"),
        ("slow_every", 0, "slow_every=0 is invalid: it must be an integer >= 1"),
        ("aux_max_lag", 0, "aux_max_lag=0 is invalid: it must be an integer >= 1"),
        ("num_slots", 3, "num_slots=3 is invalid: it must be an integer from 4 to 64"),
        ("num_slots", 65, "num_slots=65 is invalid: it must be an integer from 4 to 64"),
        ("hcm_mult", 0, "hcm_mult=0 is invalid: it must be an integer from 1 to 8"),
        ("hcm_mult", 9, "hcm_mult=9 is invalid: it must be an integer from 1 to 8"),
        ("binding", "fft", "binding='fft' is invalid: it must be one of circular, elementwise"),
        ("aux_weight", -0.1, "aux_weight=-0.1 is invalid: it must be a number in [0, 1]"),
        ("aux_weight", 1.5, "aux_weight=1.5 is invalid: it must be a number in [0, 1]"),
        ("key_eps", 0.0, "key_eps=0.0 is invalid: it must be a number in (0, 1)"),
        ("key_eps", float("nan"), "key_eps=nan is invalid: it must be a number in (0, 1)"),
        ("decay_init", 0.0, "decay_init=0.0 is invalid: it must be a number in (0, 1)"),
        ("decay_init", 1.0, "decay_init=1.0 is invalid: it must be a number in (0, 1)"),
        ("dropout", 1.0, "dropout=1.0 is invalid: it must be a number in [0, 1)"),
        ("dropout", "0.1", "dropout='0.1' is invalid: it must be a number in [0, 1)"),
        ("hierarchical", 1, "hierarchical=1 is invalid: it must be True or False"),
        ("bias", "yes", "bias='yes' is invalid: it must be True or False"),
    ],
)
def test_invalid_values_name_field_value_and_range(field, value, message):
    with pytest.raises(ValueError) as err:
        HAMTConfig(**{"vocab_size": 101, field: value})
    assert str(err.value) == message


def test_boundaries_are_accepted_and_kept():
    low = HAMTConfig(
        vocab_size=1,
        num_slots=4,
        hcm_mult=8,
        aux_weight=1,
        decay_init=0.999,
        binding="elementwise",
        hierarchical=True,
        chunk_size=1,
        slow_every=1,
        aux_max_lag=1,
    )
    assert (
        low.vocab_size,
        low.num_slots,
        low.hcm_mult,
        low.aux_weight,
        low.decay_init,
        low.binding,
        low.hierarchical,
        low.chunk_size,
        low.slow_every,
        low.aux_max_lag,
    ) == (1, 4, 8, 1, 0.999, "elementwise", True, 1, 1, 1)
    assert low.hcm_dim == 8 * 128
    high = HAMTConfig(vocab_size=101, num_slots=64, hcm_mult=1, aux_weight=0.0, dropout=0.999)
    assert (high.num_slots, high.hcm_mult, high.aux_weight, high.dropout, high.hcm_dim) == (
        64,
        1,
        0.0,
        0.999,
        128,
    )


def test_width_must_divide_into_heads():
    with pytest.raises(ValueError, match="n_embd=30 is not divisible by n_head=4"):
        HAMTConfig(vocab_size=101, n_embd=30)


def test_odd_hcm_dim_is_rejected():
    with pytest.raises(ValueError) as err:
        HAMTConfig(vocab_size=101, n_embd=9, n_head=1, hcm_mult=1)
    assert str(err.value) == "hcm_mult=1 with n_embd=9 gives an odd hcm_dim=9: it must be even"


def test_every_hamt_symbol_is_read_by_the_field_it_names():
    """hamt.SYMBOLS covers every HAMTConfig field but n_head (fixed at 1) and
    vocab_size (the tokenizer's), and every HAMT_* symbol but the choice's members."""
    kconf = open_tree()
    members = {
        sym.name
        for choice in ("HAMT_BINDING", "HAMT_SCAN_BACKEND")
        for sym in kconf.named_choices[choice].syms
    }
    assert members == {
        "HAMT_BINDING_CIRCULAR",
        "HAMT_BINDING_ELEMENTWISE",
        "HAMT_SCAN_BACKEND_AUTO",
        "HAMT_SCAN_BACKEND_TORCH",
        "HAMT_SCAN_BACKEND_TRITON",
    }
    mapped = {f: s for f, s in hamt.SYMBOLS.items() if s in SYMBOL_NAMES}
    assert set(mapped) == {f.name for f in fields(HAMTConfig)} - {"n_head", "vocab_size"}
    assert (
        set(mapped.values()) - {"GPT2_BLOCK_SIZE"}
        == {n for n in SYMBOL_NAMES if n.startswith("HAMT_")} - members
    )
    assert mapped["block_size"] == "GPT2_BLOCK_SIZE"  # the context every family shares
    assert all(s == "HAMT_" + f.upper() for f, s in mapped.items() if f != "block_size")


def test_loaded_configuration_fills_every_field():
    run = run_config_from_defaults(SETTINGS)
    cfg = from_kconfig(run)
    assert {f.name: getattr(cfg, f.name) for f in fields(cfg)} == EXPECTED
    assert cfg.hcm_dim == 48 * 3
    read = {
        name: (getattr(cfg, name), run.values[symbol])
        for name, symbol in hamt.SYMBOLS.items()
        if symbol in run.values
    }
    assert len(read) == len(EXPECTED) - 2  # all but vocab_size and n_head
    assert {name: got for name, (got, _) in read.items()} == {
        name: value for name, (_, value) in read.items()
    }
    # Every value differs from the dataclass default, so none is there by accident.
    default = HAMTConfig(vocab_size=7)
    assert [f for f in EXPECTED if getattr(cfg, f) == getattr(default, f)] == []


def test_kconfig_defaults_match_the_dataclass_defaults():
    """Kconfig's defaults and HAMTConfig's are written twice; they must agree."""
    run = run_config_from_defaults({"MODEL_HAMT": "y"})
    assert "HAMT_SLOW_EVERY" not in run.values  # hidden: the dataclass default applies
    assert from_kconfig(run, 50) == HAMTConfig(
        vocab_size=50, n_head=1, block_size=run.GPT2_BLOCK_SIZE
    )


@pytest.mark.parametrize(
    "settings, message",
    [
        (
            {"HAMT_NUM_SLOTS": "3"},
            "CONFIG_HAMT_NUM_SLOTS=3 was not applied (it would be 16): "
            "out of range; allowed: 4 to 64",
        ),
        (
            {"HAMT_AUX_WEIGHT": "1.5"},
            'CONFIG_HAMT_AUX_WEIGHT="1.5" is out of range; allowed: 0 to 1',
        ),
        (
            {"HAMT_KEY_EPS": "0.5"},
            'CONFIG_HAMT_KEY_EPS="0.5" is out of range; allowed: 1e-12 to 0.1',
        ),
        (
            {"HAMT_DECAY_INIT": "1.0"},
            'CONFIG_HAMT_DECAY_INIT="1.0" is out of range; allowed: 0.01 to 0.999',
        ),
        # In Kconfig's ranges, refused by HAMTConfig: its message names symbols, not fields.
        (
            {"HAMT_N_EMBD": "9", "HAMT_HCM_MULT": "1"},
            "CONFIG_HAMT_HCM_MULT=1 with CONFIG_HAMT_N_EMBD=9 gives an odd hcm_dim=9: it must be even",
        ),
    ],
)
def test_bad_kconfig_value_is_refused_naming_the_symbol(settings, message):
    with pytest.raises(ConfigError) as err:
        run_config_from_defaults({"MODEL_HAMT": "y", **settings})
    assert message in str(err.value)
    assert not FIELD_STYLE.search(str(err.value))


@pytest.mark.parametrize(
    "symbol, value, message",
    [
        (
            "HAMT_NUM_SLOTS",
            65,
            "CONFIG_HAMT_NUM_SLOTS=65 is invalid: it must be an integer from 4 to 64",
        ),
        (
            "HAMT_BINDING",
            "fft",
            "CONFIG_HAMT_BINDING='fft' is invalid: it must be one of circular, elementwise",
        ),
        (
            "HAMT_AUX_WEIGHT",
            1.5,
            "CONFIG_HAMT_AUX_WEIGHT=1.5 is invalid: it must be a number in [0, 1]",
        ),
        ("GPT2_BLOCK_SIZE", 0, "CONFIG_GPT2_BLOCK_SIZE=0 is invalid: it must be an integer >= 1"),
    ],
)
def test_from_run_config_names_the_symbol_not_the_field(symbol, value, message):
    """A value past Kconfig's checks (a config.py edited by hand, a replaced run)
    is still refused by HAMTConfig, with the symbol the user can change."""
    run = replace(run_config_from_defaults(SETTINGS), **{symbol: value})
    with pytest.raises(ValueError) as err:
        from_kconfig(run)
    assert str(err.value) == message


def test_slow_every_is_read_only_with_the_hierarchical_memory():
    run = run_config_from_defaults(
        {
            "MODEL_HAMT": "y",
            "HAMT_HIERARCHICAL": "y",
            "HAMT_SLOW_EVERY": "4",
            "HAMT_AUX_MAX_LAG": "64",
        }
    )
    cfg = hamt.from_run_config(run, 101)
    assert (cfg.hierarchical, cfg.slow_every, cfg.aux_max_lag) == (True, 4, 64)
    with pytest.raises(ConfigError, match="HAMT_SLOW_EVERY"):  # hidden without the banks
        run_config_from_defaults({"MODEL_HAMT": "y", "HAMT_SLOW_EVERY": "4"})
