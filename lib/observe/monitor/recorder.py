"""The sampling thread: readings every interval, running totals, the stats file.

Samplers are small objects with sample() -> {field: value} and close(); the
recorder merges their readings into one timestamped sample, keeps exact
running mean and max per field, and writes the stats file atomically. A long
run keeps at most MAX_SAMPLES samples in the file: past that, every other one
is dropped and later ones are kept at half the rate (means and maxima still
cover every sample). The file is rewritten every FLUSH_S seconds while the run
goes on and whenever the trainer records metrics; a full disk at the trainer's
write ends the run with a paragraph saying how to go on (lib/run/full_disk.py),
while the thread and stop() only log it. A resumed run continues the file it
finds.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from lib.atomic import DiskFullError, json_text, write_json_atomic
from lib.run.full_disk import file_write_failed

FORMAT = 1
MAX_SAMPLES = 4096
FLUSH_S = 10.0  # the sampling thread rewrites the file this often, for `make watch`
FIELDS = ("gpu_util", "memory_used_mb", "power_w", "temperature_c", "rss_mb", "cpu_percent")
_LABELS = {
    "gpu_util": ("GPU util", "%"),
    "memory_used_mb": ("GPU memory", " MiB"),
    "power_w": ("power", " W"),
    "temperature_c": ("temperature", " C"),
    "rss_mb": ("RSS", " MiB"),
    "cpu_percent": ("CPU", "%"),
}


class MonitorUnavailable(Exception):
    """A backend cannot run here; the message says why."""


class Sampler(Protocol):
    backend: str

    def sample(self) -> dict[str, float]: ...

    def close(self) -> None: ...


class Monitor:
    """Samples in a daemon thread between start() and stop(); write() records."""

    def __init__(
        self,
        path: Path,
        interval_s: float,
        samplers: list[Sampler],
        backend: str,
        device_name: str,
        log: Callable[[str], None] = print,
    ):
        self.path, self.interval_s, self.samplers = Path(path), interval_s, samplers
        self.backend, self.device_name, self.log = backend, device_name, log
        self.samples: list[dict[str, float]] = []
        self.totals: dict[str, dict[str, float]] = {}
        self.count, self.keep_every = 0, 1
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._warned: set[str] = set()
        self._load()

    def _load(self) -> None:
        """Continue the file a previous segment of this run wrote (resume)."""
        try:
            old = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return
        if old.get("format") == FORMAT and old.get("backend") == self.backend:
            self.samples, self.totals = old["samples"], old["totals"]
            self.count, self.keep_every = old["count"], old["keep_every"]

    def start(self) -> None:
        self._take()
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="monitor", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        flushed = time.monotonic()
        while not self._stop.wait(self.interval_s):
            self._take()
            if time.monotonic() - flushed >= FLUSH_S:
                flushed = time.monotonic()
                try:
                    self.write()
                except OSError as err:  # a full disk must not end the run from here
                    self.log(f"monitor: cannot write {self.path} ({err})")

    def _take(self) -> None:
        values: dict[str, float] = {}
        for sampler in self.samplers:
            try:
                values.update(sampler.sample())
            except Exception as err:  # a monitor must never take a run down
                if sampler.backend not in self._warned:
                    self._warned.add(sampler.backend)
                    self.log(f"monitor: {sampler.backend} sampling failed ({err}); skipping it")
        if values:
            self.record(values, time.time())

    def record(self, values: dict[str, float], when: float) -> None:
        with self._lock:
            for key, value in values.items():
                t = self.totals.setdefault(key, {"sum": 0.0, "count": 0, "max": value})
                t["sum"] += value
                t["count"] += 1
                t["max"] = max(t["max"], value)
            if self.count % self.keep_every == 0:
                self.samples.append(
                    {"time": round(when, 3), **{k: round(v, 3) for k, v in values.items()}}
                )
            self.count += 1
            if len(self.samples) >= MAX_SAMPLES:
                self.samples = self.samples[::2]
                self.keep_every *= 2

    def stop(self) -> None:
        """Stop sampling after one last sample; release the backends, write the file, log."""
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join()
        self._thread = None
        self._take()
        for sampler in self.samplers:
            sampler.close()
        try:
            self.write()
        except OSError as err:  # the run's next record write reports a full disk, not this
            self.log(f"monitor: cannot write {self.path} ({err})")
        self.log(self.describe())

    def summary(self) -> dict[str, Any]:
        """What metrics.json records: backend, file, and mean/max of each reading."""
        with self._lock:
            out: dict[str, Any] = {
                "backend": self.backend,
                "file": self.path.name,
                "device_name": self.device_name,
                "interval_s": self.interval_s,
                "samples": self.count,
            }
            for key in FIELDS:
                if key in self.totals:
                    t = self.totals[key]
                    out[f"{key}_mean"] = round(t["sum"] / t["count"], 3)
                    out[f"{key}_max"] = round(t["max"], 3)
        return out

    def write(self) -> dict[str, Any]:
        """Write the stats file atomically; returns summary() for metrics.json."""
        summary = self.summary()
        with self._lock:
            body = {
                "format": FORMAT,
                **summary,
                "fields": [k for k in FIELDS if k in self.totals],
                "count": self.count,
                "keep_every": self.keep_every,
                "totals": self.totals,
                "samples": list(self.samples),
            }
        try:
            write_json_atomic(self.path, body)
        except DiskFullError as err:  # ends the run: the paragraph says how to go on
            raise file_write_failed(
                self.path, "the file", len(json_text(body).encode()), err
            ) from None
        return summary

    def describe(self) -> str:
        s = self.summary()
        parts = [
            f"{label} mean {s[f'{k}_mean']:.1f}{unit} max {s[f'{k}_max']:.1f}{unit}"
            for k, (label, unit) in _LABELS.items()
            if f"{k}_mean" in s
        ]
        return f"monitor ({self.backend}, {s['samples']} samples): " + " | ".join(parts)


class NullMonitor:
    """MONITOR=n: the same calls, doing nothing."""

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def write(self) -> None:
        return None
