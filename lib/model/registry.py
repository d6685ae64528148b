"""Kconfig choices -> the code that implements them.

The model family is the value of the named choice MODEL (e.g. "gpt2"); its
package exposes a FAMILY record (ModelFamily below) whose build() returns a
lib.model.interface.LanguageModel. A new family is a folder with a FAMILY, a `source`
line and a MODEL choice entry in Kconfig, and one entry in FAMILY_PACKAGES;
nothing else names families: the trainer, estimator, benchmarks, evaluation,
sampling and export reach a family only through its record and its model.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lib.config.run_config import RunConfig
    from lib.model.interface import LanguageModel

# MODEL choice value -> package holding FAMILY
FAMILY_PACKAGES = {"gpt2": "gpt2", "hamt": "hamt"}


@dataclass(frozen=True)
class ModelFamily:
    """What the rest of the code needs to know about a model family, beyond
    the model interface (lib/model/interface.py)."""

    name: str
    label: str  # how messages name it ("GPT-2")
    config_cls: type
    # (run config, vocab size) -> the family's typed config; raises ValueError
    from_run_config: Callable[[RunConfig, int], Any]
    build: Callable[[Any], Any]  # family config -> lib.model.interface.LanguageModel
    variant: Callable[[RunConfig], str]  # run config -> variant tag for run ids ("vanilla")
    # (family config, lib.model.activations.Shape) -> Activations: the bytes a
    # training forward keeps for backward (the memory estimate's largest part)
    activations: Callable[[Any, Any], Any]
    # run config -> the family's variants a test matrix enabled, each as
    # NAME=VALUE overrides that select it in a single run ([[]]: as configured)
    matrix_variants: Callable[[RunConfig], list[list[tuple[str, str]]]] = lambda run: [[]]
    # (run config, vocab, max_len, shape {n_layer, n_head, n_embd}) -> {name: family
    # config}: the models `make bench-seqlen` and `make bench-precision` compare at that
    # width and depth; configs, so a bench builds only the ones it measures (build)
    bench_models: Callable[[RunConfig, int, int, dict[str, int]], dict[str, Any]] | None = None
    # (checkpoint state, run folder, checkpoint name, output folder, log) -> None:
    # `make export`; None when the family has no export format
    export: Callable[[dict[str, Any], Path, str, Path, Callable[[str], None]], None] | None = None


def config_from_symbols(
    make: Callable[..., Any], symbols: dict[str, str], run: RunConfig, **fixed: Any
) -> Any:
    """make(**fields) with each field read from its Kconfig symbol (those set in
    run), plus `fixed`; a ValueError names the symbols, not the fields, since
    symbols are what the user can change."""
    kwargs = {name: run.values[sym] for name, sym in symbols.items() if sym in run.values}
    try:
        return make(**{**kwargs, **fixed})
    except ValueError as err:
        message = str(err)
        for name, sym in symbols.items():
            if name not in fixed:  # vocab_size comes from the tokenizer, not a symbol
                message = re.sub(rf"\b{name}\b", "CONFIG_" + sym, message)
        raise ValueError(message) from None


def family(name: str) -> ModelFamily:
    try:
        package = FAMILY_PACKAGES[name]
    except KeyError:
        raise ValueError(
            f"unknown model family '{name}'; known: {', '.join(FAMILY_PACKAGES)}"
        ) from None
    return importlib.import_module(package).FAMILY


def model_from_state(state: dict[str, Any]) -> LanguageModel:
    """The model a checkpoint's state holds (lib/run/checkpoint.py's load_checkpoint):
    its family's model built from the state's model_config, its weights loaded."""
    fam = family(state["family"])
    model = fam.build(fam.config_cls(**state["model_config"]))
    model.load_state_dict(state["model"])
    return model


def families() -> list[ModelFamily]:
    """Every registered family, in registry order."""
    return [family(name) for name in FAMILY_PACKAGES]


def family_of_config(config: Any) -> ModelFamily:
    """The family whose typed config `config` is."""
    for fam in families():
        if isinstance(config, fam.config_cls):
            return fam
    raise ValueError(f"{type(config).__name__} is no registered family's config")
