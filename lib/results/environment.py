"""The software and hardware runs recorded (metrics.json "environment":
Python, torch and its CUDA/ROCm build, the other packages that affect results,
platform, CPU, GPU, driver), gathered for the report: each setting once with
its value where every run agrees, and each value with its runs where they
differ. Runs written before the record existed simply have none; an
environment of another shape is shown as far as it goes, never an error."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from lib.results.collect import RunRow

KEY = "environment"


def flatten(value: Any, prefix: str = "") -> dict[str, str]:
    """{"torch": {"version": "2.5"}} -> {"torch.version": "2.5"}; lists joined by "; "."""
    if isinstance(value, dict):
        out: dict[str, str] = {}
        for k, v in value.items():
            out.update(flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    if isinstance(value, list):
        text = "; ".join(
            ", ".join(f"{k}={v}" for k, v in x.items()) if isinstance(x, dict) else str(x)
            for x in value
        )
    else:
        text = "-" if value is None else str(value)
    return {prefix or "value": text}


@dataclass
class Setting:
    name: str
    values: dict[str, list[str]] = field(default_factory=dict)  # value -> run ids


@dataclass
class Environments:
    settings: list[Setting]
    recorded: list[str]  # run ids with an environment record
    missing: list[str]  # run ids without one

    @property
    def identical(self) -> bool:
        """Every run recorded one, and all records are the same."""
        return not self.missing and all(
            len(s.values) == 1 and len(next(iter(s.values.values()))) == len(self.recorded)
            for s in self.settings
        )


def gather(rows: list[RunRow]) -> Environments:
    settings: dict[str, Setting] = {}
    recorded, missing = [], []
    for r in rows:
        env = r.metrics.get(KEY)
        if not env:
            missing.append(r.run_id)
            continue
        recorded.append(r.run_id)
        for name, value in flatten(env).items():
            settings.setdefault(name, Setting(name)).values.setdefault(value, []).append(r.run_id)
    return Environments(list(settings.values()), recorded, missing)
