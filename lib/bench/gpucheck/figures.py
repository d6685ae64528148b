"""A stage's figures, written to WORK/<stage>.json (atomically) as each is
measured, so the driver keeps them when it ends the stage at its cap. A
resumed stage starts from the figures its earlier run reached (the driver
writes them there first) and measures only what they lack."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


class Figures:
    def __init__(self, path: Path):
        self.path = path
        self.figures: dict[str, Any] = json.loads(path.read_text()) if path.is_file() else {}

    def __call__(self, key: str, value: Any) -> None:
        self.figures[key] = value
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.figures, indent=1, default=str) + "\n")
        os.replace(tmp, self.path)

    def has(self, key: str) -> bool:
        """Measured already (by the run this one resumes), without an error."""
        value = self.figures.get(key)
        return value is not None and not (isinstance(value, dict) and "error" in value)


class StageSkipped(Exception):
    """The stage ran but had nothing to measure here (every GPU test skipped on a CPU)."""


def reached(put: Any) -> dict[str, Any]:
    """The figures a stage starts from: those of the run it resumes, or none."""
    return put.figures if isinstance(put, Figures) else {}
