"""What `make import-knlp` (and a knlp-format defconfig) prints, readable first:
a line when the file's headline feature does not run, "this loads as: <model,
attention, optimizer, pruning, steps, batch>", then the translation's report
with its knlp defaults one line per group (lib/config/knlp/translate.py writes
them as "NAME=value (as SYMBOL)" items, each group named by where knlp sets it).
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any

from lib.config.knlp.table import COMMIT

DEFAULTS = "knlp defaults applied ("
# The attention features a knlp file's names announce, by a part of the name.
FEATURES = (("RA_MLA", "RA+MLA"), ("KVSPLICE", "KVSplice"), ("FIM", "KVSplice"), ("MLA", "MLA"))


def loads_as(values: dict[str, Any]) -> str:
    """One line: the model, attention, optimizer, pruning, steps and batch that run."""
    model = values.get("MODEL", "gpt2")
    size = values.get("GPT2_MODEL") or ""
    shape = (
        f"{values.get('GPT2_N_LAYER')}x{values.get('GPT2_N_EMBD')}"
        if size == "custom" or not size
        else size
    )
    attention = (
        "several attention variants (a matrix)"
        if values.get("GPT2_ATTENTION_MULTIPLE")
        else f"{values.get('GPT2_ATTENTION', 'vanilla')} attention"
    )
    optimizer = (
        "several optimizers (a matrix)"
        if values.get("OPTIMIZER_MODE") == "multiple"
        else values.get("OPTIMIZER", "?")
    )
    pruning = values.get("PRUNING_MODE", "none")
    if pruning == "single":
        pruning = (
            f"{values.get('PRUNING_METHOD')} pruning to {values.get('PRUNING_TARGET_SPARSITY')}"
        )
    elif pruning == "none":
        pruning = "no pruning"
    else:
        pruning = "several pruning settings (a matrix)"
    micro, accumulation = values.get("BATCH_SIZE"), values.get("GPT2_GRADIENT_ACCUMULATION")
    if values.get("HYPER_PARAM") == "auto":
        batch = (
            f"effective batch {values.get('TARGET_EFFECTIVE_BATCH')} (TARGET_EFFECTIVE_BATCH, "
            f"micro-batch chosen at start)"
        )
    else:
        batch = f"batch {micro} x accumulation {accumulation}"
    return (
        f"this loads as: {model} {shape}, {attention}, {optimizer}, {pruning}, "
        f"{values.get('GPT2_MAX_ITERS')} steps, {batch}, on {values.get('DEVICE', 'auto')}"
    )


def headline_dropped(text: str, values: dict[str, Any]) -> str | None:
    """One line when the file switches on an attention feature that does not run
    (knlp's code at its commit builds plain attention for it, and so does this)."""
    enabled = []
    for line in text.splitlines():
        m = re.match(r"\s*CONFIG_(\w+)=(.*)", line)
        if not m or m.group(2).strip() in ("n", '""', "0"):
            continue
        feature = next((f for part, f in FEATURES if part in m.group(1)), None)
        if feature is not None and feature not in enabled:  # the first part named decides
            enabled.append(feature)
    runs = values.get("GPT2_ATTENTION", "vanilla")
    if not enabled or values.get("GPT2_ATTENTION_MULTIPLE") or runs != "vanilla":
        return None
    return (
        f"headline dropped: this file switches on {', '.join(enabled)}, but knlp's code at "
        f"{COMMIT[:8]} trains it with plain attention, and so does this import"
    )


def grouped(report: list[str]) -> list[str]:
    """The translation's report with its knlp defaults one line per group."""
    out = []
    for line in report:
        if not line.startswith(DEFAULTS):
            out.append(line)
            continue
        items = line.split(": ", 1)[1].split(", ")
        groups: dict[str, list[str]] = defaultdict(list)
        for item in _items(items):
            name, _, rest = item.partition("=")
            symbol = re.search(r" \(as (\w+)\)$", rest)
            value = rest[: symbol.start()] if symbol else rest
            where = name if name.startswith("knlp's") else "knlp's Kconfig defaults"
            groups[where].append(f"{symbol.group(1) if symbol else name}={value}")
        out.append(line.split(": ", 1)[0] + ", by where knlp sets them:")
        out += [f"  {where}: {', '.join(settings)}" for where, settings in groups.items()]
    return out


def _items(parts: list[str]) -> list[str]:
    """Items split at ", " put back together where the split fell inside a group's
    name ("knlp's MLA models (vocabulary 50257, biases, tied head)=y (as GPT2_BIAS)")."""
    items: list[str] = []
    for part in parts:
        if items and items[-1].count("(") > items[-1].count(")"):
            items[-1] += ", " + part
        else:
            items.append(part)
    return items


def batch_dropped(text: str, values: dict[str, Any]) -> str | None:
    """A line when the file's TARGET_EFFECTIVE_BATCH is not what trains."""
    m = re.search(r"^\s*CONFIG_TARGET_EFFECTIVE_BATCH=(\d+)", text, re.M)
    if not m:
        return None
    wanted = int(m.group(1))
    if values.get("HYPER_PARAM") == "auto" and values.get("TARGET_EFFECTIVE_BATCH") == wanted:
        return None  # honoured: loads_as says "effective batch N (TARGET_EFFECTIVE_BATCH)"
    trains = (values.get("BATCH_SIZE") or 0) * (values.get("GPT2_GRADIENT_ACCUMULATION") or 0)
    return (
        f"TARGET_EFFECTIVE_BATCH={wanted} dropped: the file's batch is set by hand "
        f"(HYPER_PARAM_MANUAL), so each step trains {values.get('BATCH_SIZE')} x "
        f"{values.get('GPT2_GRADIENT_ACCUMULATION')} = {trains} sequences; "
        f'SET="HYPER_PARAM_AUTO=y TARGET_EFFECTIVE_BATCH={wanted}" trains {wanted}'
    )


def ordered(notes: list[str], text: str | None, values: dict[str, Any] | None) -> list[str]:
    """The whole report: the headline line, what it loads as, then the rest."""
    first = []
    if values is not None:
        dropped = [headline_dropped(text or "", values), batch_dropped(text or "", values)]
        first = [*(d for d in dropped if d), loads_as(values)]
    return first + grouped(notes)
