"""Names of configurations for figures and the LaTeX tables: what was trained
("AdamW magnitude 50 %"), not the folder name a run happens to have (which
carries a timestamp or a seed suffix). Two configurations that would share a
name are told apart by the overrides that differ between them, and failing
that by their configuration key."""

from __future__ import annotations

from lib.optim import registry as optimizers
from lib.results.collect import RunRow
from lib.results.seeds import Configuration

OPTIMIZERS = optimizers.labels()  # name -> label, from lib/optim/registry.py


def method(r: RunRow, with_model: bool = False) -> str | None:
    """Optimizer, variant and pruning method without the sparsity
    ("AdamW magnitude"), or None for a run whose configuration is unknown."""
    if r.model is None or r.optimizer in (None, "-"):
        return None
    parts = [r.model] if with_model else []
    parts.append(OPTIMIZERS.get(r.optimizer or "", r.optimizer or "?"))
    if r.variant and r.variant not in ("vanilla", r.model):
        parts.append(r.variant)
    parts.append("dense" if r.pruning == "none" else r.pruning)
    return " ".join(parts)


def describe(r: RunRow, with_model: bool = False) -> str | None:
    """method() and the target sparsity: "AdamW magnitude 50 %", "AdamW dense"."""
    name = method(r, with_model)
    if name is None or r.pruning == "none" or r.sparsity_target is None:
        return name
    return f"{name} {100 * r.sparsity_target:g} %"


def _first(c: Configuration) -> RunRow:
    return next(iter(c.runs.values()))


def names(configs: list[Configuration]) -> dict[str, str]:
    """Configuration key -> a distinct readable name."""
    with_model = len({c.model for c in configs}) > 1
    out = {c.key: describe(_first(c), with_model) or c.key for c in configs}
    for name in {n for n in out.values() if list(out.values()).count(n) > 1}:
        same = [c for c in configs if out[c.key] == name]
        overrides = [_first(c).overrides for c in same]
        differ = sorted({k for o in overrides for k in o if len({x.get(k) for x in overrides}) > 1})
        for c, o in zip(same, overrides):
            extra = ", ".join(f"{k}={o[k]}" for k in differ if k in o)
            out[c.key] = f"{name} ({extra})" if extra else name
    for name in {n for n in out.values() if list(out.values()).count(n) > 1}:
        for c in configs:
            if out[c.key] == name:
                out[c.key] = f"{name} [{c.key}]"
    return out
