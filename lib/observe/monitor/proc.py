"""The training process itself: resident memory and CPU use, from /proc and os.times().

Works on any device; it is the whole of monitoring on CPU-only runs. RSS comes
from /proc/self/statm (Linux); elsewhere it is left out. CPU use is process CPU
time (user + system, all threads) over wall time, in percent of one core, so a
run using two cores fully reads 200.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

STATM = Path("/proc/self/statm")


class ProcSampler:
    backend = "proc"

    def __init__(self, statm: Path = STATM):
        self.statm = statm
        self.page_mb = os.sysconf("SC_PAGE_SIZE") / 2**20 if hasattr(os, "sysconf") else 0
        self._last = self._times()

    @staticmethod
    def _times() -> tuple[float, float]:
        t = os.times()
        return time.monotonic(), t.user + t.system

    def rss_mb(self) -> float | None:
        try:
            return int(self.statm.read_text().split()[1]) * self.page_mb
        except (OSError, IndexError, ValueError):
            return None

    def sample(self) -> dict[str, float]:
        now, cpu = self._times()
        wall = now - self._last[0]
        out: dict[str, float] = {}
        if wall > 0:
            out["cpu_percent"] = 100.0 * (cpu - self._last[1]) / wall
        self._last = (now, cpu)
        rss = self.rss_mb()
        if rss is not None:
            out["rss_mb"] = rss
        return out

    def close(self) -> None:
        pass
