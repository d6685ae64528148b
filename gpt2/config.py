"""Hyperparameters of a GPT-2 model, checked when they are created.

Validation happens here rather than deep inside the model so that a bad
value read from .config fails with one line naming the option, instead of
a shape error from somewhere in a matrix multiply.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from gpt2.presets import PRESETS

_POSITIVE_INT_FIELDS = ("vocab_size", "block_size", "n_layer", "n_head", "n_embd")


@dataclass(kw_only=True)
class GPT2Config:
    """Shape and regularisation of a GPT-2 model.

    Defaults are GPT-2 small; vocab_size has no default because it depends
    on the tokenizer (and on whether it was padded).
    """

    vocab_size: int
    block_size: int = 1024
    n_layer: int = 12
    n_head: int = 12
    n_embd: int = 768
    dropout: float = 0.0
    bias: bool = True

    def __post_init__(self) -> None:
        for name in _POSITIVE_INT_FIELDS:
            _check_positive_int(name, getattr(self, name))
        _check_dropout(self.dropout)
        if not isinstance(self.bias, bool):
            raise ValueError(f"bias={self.bias!r} is invalid: it must be True or False")
        _check_heads_divide_width(self.n_embd, self.n_head)

    @property
    def head_dim(self) -> int:
        """Width of one attention head."""
        return self.n_embd // self.n_head

    @classmethod
    def from_preset(cls, name: str, **overrides: Any) -> GPT2Config:
        """Config for a published size; overrides (vocab_size, block_size, ...) win."""
        key = name.lower()
        if key not in PRESETS:
            known = ", ".join(PRESETS)
            raise ValueError(f"unknown GPT-2 preset {name!r}: known presets are {known}")
        fields = asdict(PRESETS[key])
        fields.update(overrides)
        return cls(**fields)


def _check_positive_int(name: str, value: object) -> None:
    # bool is a subclass of int; True as a layer count is always a mistake.
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name}={value!r} is invalid: it must be a positive integer")
    if value <= 0:
        raise ValueError(f"{name}={value} is invalid: it must be a positive integer")


def _check_dropout(value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"dropout={value!r} is invalid: it must be a number in [0, 1)")
    # 1.0 would zero every activation, so the upper end is excluded.
    if not 0.0 <= value < 1.0:
        raise ValueError(f"dropout={value} is invalid: it must be in [0, 1)")


def _check_heads_divide_width(n_embd: int, n_head: int) -> None:
    if n_embd % n_head == 0:
        return
    lower = n_embd // n_head * n_head
    upper = lower + n_head
    suggestions = f"{lower} or {upper}" if lower > 0 else f"{upper}"
    raise ValueError(
        f"n_embd={n_embd} is not divisible by n_head={n_head}: "
        f"each head needs an equal share of the width; try n_embd={suggestions}"
    )
