"""The pruner's arguments and checkpoint state: what each must be to be accepted."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

STATE_VERSION = 1


def check_state(
    state: dict[str, Any],
    shapes: dict[str, tuple[int, ...]],
    scored: str | None,
    initial: bool,
) -> None:
    """Raise ValueError unless `state` (Pruner.state_dict) fits a pruner of these
    parameters (name -> shape, in order); `scored`: its method when it keeps movement
    scores; `initial`: whether it keeps knlp's initial weights."""
    if state.get("version") != STATE_VERSION:
        raise ValueError(f"state version {state.get('version')!r} is not {STATE_VERSION}")
    if list(state["names"]) != list(shapes):
        raise ValueError("state is invalid: its masks belong to different parameters")
    if scored is not None and "scores" not in state:
        raise ValueError(f"state is invalid: method {scored!r} needs movement scores")
    if initial and "initial" not in state:
        raise ValueError("state is invalid: knlp's movement score needs the initial weights")
    for (name, shape), mask in zip(shapes.items(), state["masks"]):
        if tuple(mask.shape) != shape:
            raise ValueError(
                f"state is invalid: mask {name} has shape {tuple(mask.shape)}, not {shape}"
            )


def check_choice(name: str, value: Any, allowed: Iterable[str]) -> None:
    allowed = list(allowed)
    if value not in allowed:
        raise ValueError(f"{name}={value!r} is invalid: it must be one of {', '.join(allowed)}")


def check_int(name: str, value: Any, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name}={value!r} is invalid: it must be an integer >= {minimum}")
