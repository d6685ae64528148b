"""HAMT's slot use in the per-run summary: the final value of the series a HAMT run
records in metrics.json (hamt/model.py's aux_metrics, kept by the trainer at each
log step). slot_utilisation is the entropy of the slot writes over log(slots), 1
when every slot is written equally; slots_used the fraction of slots taking over
half a fair share. A column appears only where some run recorded its series, so a
summary of runs without them (GPT-2's) is unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from lib.results.collect import RunRow

SLOT_COLUMNS = [("slot_utilisation", "slot utilisation"), ("slots_used", "slots used")]


def final(r: RunRow, name: str) -> float | None:
    """The last value of the run's "<name>_series" (lib/run/record_model.py checked its shape)."""
    series = r.metrics.get(f"{name}_series")
    values = series.get("values") if isinstance(series, dict) else None
    return values[-1] if isinstance(values, list) and values else None


def columns(rows: list[RunRow]) -> list[tuple[str, Callable[[RunRow], Any], str]]:
    """(header, value, format) of each slot figure some run among rows recorded."""
    return [
        (header, partial(final, name=name), ".3f")
        for name, header in SLOT_COLUMNS
        if any(final(r, name) is not None for r in rows)
    ]
