"""A stage's figures, written to WORK/<stage>.json (atomically) as each is
measured, so the driver keeps them when it ends the stage at its cap. A
resumed stage starts from the figures its earlier run reached (the driver
writes them there first) and measures only what they lack."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


class Figures:
    """began: the worker's time.monotonic() before its imports, when known."""

    def __init__(self, path: Path, began: float | None = None):
        self.path = path
        self.began = began
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


class Progress:
    """The phases a stage has begun, put under `key` as each begins: its name,
    when it began (at_s: seconds since the stage's worker started, else since
    this Progress was made) and, once the next one begins, how long it took.
    A stage killed at its cap thus shows the phase it was in and where its
    time went; finish() closes the last phase of a stage that ends."""

    START = "worker start-up (imports)"

    def __init__(
        self,
        put: Callable[[str, Any], None],
        key: str = "progress",
        clock: Callable[[], float] = time.monotonic,
    ):
        self.put, self.key, self.clock = put, key, clock
        began = put.began if isinstance(put, Figures) else None
        self.began = clock() if began is None else began
        self.phases: list[dict[str, Any]] = []
        if began is not None:
            self.phases.append({"phase": self.START, "at_s": 0.0})

    def __call__(self, phase: str) -> None:
        now = self._close()
        self.phases.append({"phase": phase, "at_s": now})
        self.put(self.key, self.phases)

    def finish(self) -> None:
        self._close()
        self.put(self.key, self.phases)

    def _close(self) -> float:
        now = round(self.clock() - self.began, 2)
        if self.phases and "seconds" not in self.phases[-1]:
            self.phases[-1]["seconds"] = round(now - self.phases[-1]["at_s"], 2)
        return now
