"""HAMT model family: config from Kconfig (HAMT_* symbols), model builder, and
the rest of its registry record (lib/model/registry.py)."""

from __future__ import annotations

from dataclasses import fields
from typing import TYPE_CHECKING, Any

from hamt.activations import activations
from hamt.config import HAMTConfig
from lib.model.registry import ModelFamily, config_from_symbols

if TYPE_CHECKING:
    from lib.config.run_config import RunConfig

# HAMTConfig field -> Kconfig symbol: HAMT_<FIELD>, except the context length,
# which every family shares. n_head has no symbol: the memory reads whole slots,
# so heads would be a knob that changes nothing (it stays 1).
SYMBOLS = {
    f.name: "HAMT_" + f.name.upper()
    for f in fields(HAMTConfig)
    if f.name not in ("n_head", "vocab_size")
} | {
    "block_size": "GPT2_BLOCK_SIZE",
}


def from_run_config(run: RunConfig, vocab_size: int) -> HAMTConfig:
    return config_from_symbols(HAMTConfig, SYMBOLS, run, vocab_size=vocab_size, n_head=1)


def build(config: HAMTConfig):
    from hamt.model import HAMT  # torch import deferred: config checks stay fast

    return HAMT(config)


def export(*args: Any) -> None:
    from hamt.export import export as hf_export  # torch import deferred

    hf_export(*args)


def variant(run: RunConfig) -> str:
    return "hamt"


def bench_models(
    run: RunConfig, vocab: int, max_len: int, shape: dict[str, int]
) -> dict[str, HAMTConfig]:
    """HAMT's config at the given width and depth (it has no heads), its options
    as configured where the configuration is a HAMT one, else the defaults."""
    options = {f: run.values[s] for f, s in SYMBOLS.items() if s in run.values}
    options.update(shape, vocab_size=vocab, block_size=max_len)
    return {"hamt": HAMTConfig(**options)}


FAMILY = ModelFamily(
    name="hamt",
    label="HAMT",
    config_cls=HAMTConfig,
    from_run_config=from_run_config,
    build=build,
    variant=variant,
    activations=activations,
    bench_models=bench_models,
    export=export,
)
