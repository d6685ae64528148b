"""Bounded autotuning of fla-core's Triton kernels (HAMT_KERNEL_PIN).

fla decorates each kernel chunk_gla runs with triton.autotune: the first
call per shape class (the autotuner's key: block sizes, dimensions, dtypes)
compiles and times every listed configuration, about 230 for one cold
forward and backward, minutes on an H100. Pinned, each autotuner keeps one
configuration per shape class: of those fla's own pruning leaves for the
shape, the one with 4 warps and 2 pipeline stages if listed (Triton's
usual default, valid on every GPU fla supports), else the nearest, ties
in fla's order. Triton then compiles that one and times nothing (its
Autotuner skips benchmarking when pruning leaves a single configuration).

The pin wraps each autotuner's prune_configs; unpinning restores it, so
a process follows the last model's setting.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Sequence
from types import ModuleType
from typing import Any

# The modules holding the kernels chunk_gla's forward and backward launch
# (fla-core 0.6.0: fla/ops/gla/chunk.py and what it imports kernels from).
FLA_MODULES = ("fla.ops.gla.chunk", "fla.ops.common.chunk_h", "fla.ops.utils.cumsum")
_ORIGINAL = "_hamt_prune_configs"


def choose(configs: Sequence[Any]) -> Any:
    """The pinned configuration: 4 warps and 2 stages, else the nearest
    (warps first), ties in the listed order."""
    return min(
        configs,
        key=lambda c: (abs(getattr(c, "num_warps", 4) - 4), abs(getattr(c, "num_stages", 2) - 2)),
    )


def autotuners(modules: Iterable[ModuleType]) -> list[Any]:
    """Every autotuner of the modules' kernels, found through the wrappers
    around them (triton.heuristics and the like keep the inner one as .fn)."""
    found: dict[int, Any] = {}
    for module in modules:
        for value in vars(module).values():
            seen = 0
            while value is not None and seen < 8:
                if hasattr(value, "prune_configs") and hasattr(value, "configs"):
                    found[id(value)] = value
                value, seen = getattr(value, "fn", None), seen + 1
    return list(found.values())


def pin(tuner: Any) -> None:
    """One configuration per shape class from now on (idempotent)."""
    if hasattr(tuner, _ORIGINAL):
        return
    original = tuner.prune_configs

    def one(kwargs: dict[str, Any]) -> list[Any]:
        return [choose(original(kwargs))]

    setattr(tuner, _ORIGINAL, original)
    tuner.prune_configs = one


def unpin(tuner: Any) -> None:
    if hasattr(tuner, _ORIGINAL):
        tuner.prune_configs = getattr(tuner, _ORIGINAL)
        delattr(tuner, _ORIGINAL)


_STATE: dict[str, bool] = {}


def pin_kernels(enabled: bool, modules: Sequence[str] = FLA_MODULES) -> None:
    """Pin (or unpin) every autotuner in modules. Cheap per call: the
    modules are walked only when the setting changes (before the kernels'
    first launch, which is what it bounds)."""
    key = ",".join(modules)
    if _STATE.get(key) is enabled:
        return
    for tuner in autotuners(importlib.import_module(name) for name in modules):
        (pin if enabled else unpin)(tuner)
    _STATE[key] = enabled
