"""How a record's figures and settings read in a table cell: a figure to its
precision or an em dash where the record lacks it, the settings as phrases."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

DASH = "—"
MEASURES = {"peak_rss": "process peak RSS", "cuda_max_allocated": "CUDA max allocated"}


def value_at(r: dict, path: str) -> Any:
    """r's value at a dotted path, None where any part is missing."""
    for key in path.split("."):
        if not isinstance(r, dict) or key not in r:
            return None
        r = r[key]
    return r


def cell(value: Any, spec: str, suffix: str = "") -> str:
    return DASH if value is None else f"{value:{spec}}{suffix}"


def percent(share: float | None) -> float | None:
    return None if share is None else 100 * share


def per_round(values: list[float] | None) -> str:
    return DASH if not values else " / ".join(f"{v:.3f}" for v in values)


# What a record ran with: the values at these paths as one phrase. Those all of a
# folder's records share go in the sentence above its table, the others in each row's
# settings cell.
SETTINGS: list[tuple[tuple[str, ...], Callable[..., str]]] = [
    (("model_config.n_layer", "model_config.n_embd"), lambda n, c: f"{n} layers x {c}"),
    (("model_config.attention",), lambda a: f"{a} attention"),
    (("model_config.num_slots",), lambda s: f"{s} memory slots"),
    (("model_config.vocab_size",), lambda v: f"vocabulary {v}"),
    (("params",), lambda p: f"{p:,} parameters"),
    (
        ("batch_size", "model_config.block_size", "gradient_accumulation"),
        lambda b, t, g: f"batch {b} x {t}" + (f" x {g} accumulated" if g != 1 else ""),
    ),
    (("steps_per_round", "rounds"), lambda s, n: f"{s} steps x {n} round{'s' * (n != 1)}"),
    (("threads",), lambda t: f"{t} threads"),
    (("dtype",), str),
    (("compiled",), lambda c: "compiled" if c else "eager"),
    (("ours.speed.loss_impl",), lambda impl: f"ours' loss {impl}"),
    (("peak_memory_measure",), lambda m: f"peak memory as {MEASURES.get(m, m)}"),
]


def phrases(r: dict) -> list[str | None]:
    """Each setting's phrase for record r; None where the record lacks a value."""
    out = []
    for paths, phrase in SETTINGS:
        values = [value_at(r, p) for p in paths]
        out.append(None if any(v is None for v in values) else phrase(*values))
    return out
