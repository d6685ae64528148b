"""Kconfig choices -> the code that implements them.

The model family is the value of the named choice MODEL (e.g. "gpt2"); its
package exposes a FAMILY record. A new family is a folder with a FAMILY, a
`source` line in Kconfig and one entry here; nothing else names families.
"""
from __future__ import annotations

import importlib
import re
from dataclasses import dataclass
from typing import Any, Callable

# MODEL choice value -> package holding FAMILY
FAMILY_PACKAGES = {"gpt2": "gpt2", "hamt": "hamt"}


@dataclass(frozen=True)
class ModelFamily:
    """What the trainer needs to know about a model family."""
    name: str
    config_cls: type
    # (run config, vocab size) -> the family's typed config; raises ValueError
    from_run_config: Callable[[Any, int], Any]
    build: Callable[[Any], Any]  # family config -> nn.Module with the model interface
    variant: Callable[[Any], str]  # run config -> variant tag for run ids ("vanilla")
    # run config -> the family's variants a test matrix enabled, each as
    # NAME=VALUE overrides that select it in a single run ([[]]: as configured)
    matrix_variants: Callable[[Any], list[list[tuple[str, str]]]] = lambda run: [[]]


def config_from_symbols(make: Callable[..., Any], symbols: dict[str, str], run: Any,
                        **fixed: Any) -> Any:
    """make(**fields) with each field read from its Kconfig symbol (those set in
    run), plus `fixed`; a ValueError names the symbols, not the fields, since
    symbols are what the user can change."""
    kwargs = {name: run.values[sym] for name, sym in symbols.items() if sym in run.values}
    try:
        return make(**{**kwargs, **fixed})
    except ValueError as err:
        message = str(err)
        for name, sym in symbols.items():
            message = re.sub(rf"\b{name}\b", "CONFIG_" + sym, message)
        raise ValueError(message) from None


def family(name: str) -> ModelFamily:
    try:
        package = FAMILY_PACKAGES[name]
    except KeyError:
        raise ValueError(f"unknown model family '{name}'; known: "
                         f"{', '.join(FAMILY_PACKAGES)}") from None
    return importlib.import_module(package).FAMILY
