"""GPT2Config validation and presets."""

from __future__ import annotations

import pytest

from gpt2.config import GPT2Config
from gpt2.presets import PRESETS


def test_defaults_are_gpt2_small_with_64_wide_heads() -> None:
    cfg = GPT2Config(vocab_size=50257)
    assert (cfg.block_size, cfg.n_layer, cfg.n_head, cfg.n_embd) == (1024, 12, 12, 768)
    assert (cfg.dropout, cfg.bias) == (0.0, True)
    assert cfg.head_dim == 64


def test_vocab_size_is_required_and_fields_are_keyword_only() -> None:
    with pytest.raises(TypeError):
        GPT2Config()  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        GPT2Config(50257)  # type: ignore[misc]


def test_width_not_divisible_by_heads_names_both_and_suggests_neighbours() -> None:
    with pytest.raises(ValueError) as err:
        GPT2Config(vocab_size=100, n_embd=100, n_head=3)
    message = str(err.value)
    assert "n_embd=100" in message and "n_head=3" in message
    assert "99 or 102" in message
    assert "\n" not in message


def test_width_smaller_than_head_count_suggests_only_the_first_multiple() -> None:
    with pytest.raises(ValueError, match=r"n_embd=5 .*n_head=8.*try n_embd=8$"):
        GPT2Config(vocab_size=100, n_embd=5, n_head=8)


@pytest.mark.parametrize("field", ["vocab_size", "block_size", "n_layer", "n_head", "n_embd"])
@pytest.mark.parametrize("bad", [0, -4])
def test_non_positive_sizes_are_rejected_by_name(field: str, bad: int) -> None:
    with pytest.raises(
        ValueError, match=rf"^{field}={bad} is invalid: it must be a positive integer"
    ):
        GPT2Config(**{"vocab_size": 100, field: bad})


@pytest.mark.parametrize("bad", [2.0, "12", True])
def test_non_integer_sizes_are_rejected(bad: object) -> None:
    with pytest.raises(ValueError, match=r"^n_layer=.* must be a positive integer"):
        GPT2Config(vocab_size=100, n_layer=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [-0.1, 1.0, 1.5])
def test_dropout_outside_zero_to_one_is_rejected(bad: float) -> None:
    with pytest.raises(ValueError, match=rf"^dropout={bad} is invalid: it must be in \[0, 1\)"):
        GPT2Config(vocab_size=100, dropout=bad)


def test_dropout_accepts_zero_and_values_below_one() -> None:
    assert GPT2Config(vocab_size=100, dropout=0).dropout == 0
    assert GPT2Config(vocab_size=100, dropout=0.9).dropout == 0.9


def test_bias_must_be_a_bool() -> None:
    with pytest.raises(ValueError, match=r"^bias=1 is invalid"):
        GPT2Config(vocab_size=100, bias=1)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("name", "shape"),
    [
        ("124m", (12, 12, 768)),
        ("350m", (24, 16, 1024)),
        ("774m", (36, 20, 1280)),
        ("1558m", (48, 25, 1600)),
    ],
)
def test_presets_give_published_shapes_with_64_wide_heads(name: str, shape: tuple) -> None:
    cfg = GPT2Config.from_preset(name, vocab_size=50257)
    assert (cfg.n_layer, cfg.n_head, cfg.n_embd) == shape
    assert cfg.head_dim == 64
    # Context, dropout and bias are the run's, not the preset's.
    assert (cfg.block_size, cfg.dropout, cfg.bias) == (1024, 0.0, True)


def test_preset_overrides_set_run_fields_and_names_are_case_insensitive() -> None:
    cfg = GPT2Config.from_preset("124M", vocab_size=50304, block_size=256, dropout=0.1, bias=False)
    assert (cfg.vocab_size, cfg.block_size, cfg.dropout, cfg.bias) == (50304, 256, 0.1, False)
    assert cfg.n_embd == 768


def test_unknown_preset_lists_the_known_ones() -> None:
    with pytest.raises(ValueError) as err:
        GPT2Config.from_preset("7b", vocab_size=50257)
    message = str(err.value)
    assert "'7b'" in message
    for name in ("124m", "350m", "774m", "1558m"):
        assert name in message


def test_presets_cannot_be_modified() -> None:
    with pytest.raises(TypeError):
        PRESETS["tiny"] = PRESETS["124m"]  # type: ignore[index]
