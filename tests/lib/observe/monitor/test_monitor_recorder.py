"""The sampling thread, its running statistics and its file."""

from __future__ import annotations

import json
import threading
import time

import pytest

from lib.observe.monitor import recorder
from lib.observe.monitor.recorder import Monitor


class Counter:
    """A sampler whose readings are 1, 2, 3, ..."""

    backend = "fake"

    def __init__(self, enough: int = 4):
        self.n, self.closed = 0, False
        self.enough = threading.Event()  # set once `enough` readings were taken
        self._enough = enough

    def sample(self):
        self.n += 1
        if self.n >= self._enough:
            self.enough.set()
        return {"gpu_util": float(self.n)}

    def close(self):
        self.closed = True


def waits_of(monitor: Monitor) -> list[float | None]:
    """The timeouts the sampling thread waits with between samples (its interval)."""
    waits: list[float | None] = []
    wait = monitor._stop.wait

    def recorded(timeout=None):
        waits.append(timeout)
        return wait(timeout)

    monitor._stop.wait = recorded  # type: ignore[method-assign]
    return waits


def test_thread_samples_at_the_interval_until_stopped(tmp_path):
    """Decided by events, not by how many samples fit into a sleep on a loaded host."""
    sampler, lines = Counter(), []
    monitor = Monitor(tmp_path / "s.json", 0.05, [sampler], "fake", "dev", lines.append)
    waits = waits_of(monitor)
    monitor.start()
    assert sampler.enough.wait(60)  # start's sample and 3 of the thread's (a hang guard)
    monitor.stop()
    after = sampler.n
    time.sleep(0.15)
    assert sampler.n == after and sampler.closed  # nothing sampled after stop
    assert after >= 5  # start, at least 3 of the thread's, stop
    assert len(waits) >= after - 2 and set(waits) == {0.05}  # each wait is the interval
    summary = monitor.summary()
    assert summary["samples"] == after and summary["gpu_util_max"] == after
    assert summary["gpu_util_mean"] == pytest.approx((after + 1) / 2)
    assert lines[-1].startswith(f"monitor (fake, {after} samples): GPU util mean")


def test_long_runs_are_thinned_but_statistics_stay_exact(tmp_path, monkeypatch):
    monkeypatch.setattr(recorder, "MAX_SAMPLES", 8)
    monitor = Monitor(tmp_path / "s.json", 1, [], "fake", "dev")
    for i in range(1, 101):
        monitor.record({"power_w": float(i)}, when=float(i))
    assert len(monitor.samples) < 8 and monitor.keep_every == 16
    times = [s["time"] for s in monitor.samples]
    assert times == sorted(times) and times[0] == 1.0 and times[-1] >= 81  # spans the run
    summary = monitor.write()
    assert summary["power_w_mean"] == 50.5 and summary["power_w_max"] == 100.0
    assert summary["samples"] == 100
    on_disk = json.loads((tmp_path / "s.json").read_text())
    assert on_disk["samples"] == monitor.samples and on_disk["power_w_mean"] == 50.5


def test_a_resumed_run_continues_the_file(tmp_path):
    first = Monitor(tmp_path / "s.json", 1, [], "fake", "dev")
    for v in (10.0, 20.0):
        first.record({"rss_mb": v}, when=v)
    first.write()
    second = Monitor(tmp_path / "s.json", 1, [], "fake", "dev")
    second.record({"rss_mb": 60.0}, when=30.0)
    summary = second.write()
    assert summary["samples"] == 3 and summary["rss_mb_mean"] == 30.0
    assert [s["rss_mb"] for s in second.samples] == [10.0, 20.0, 60.0]


class Broken:
    backend = "broken"

    def sample(self):
        raise RuntimeError("sensor gone")

    def close(self):
        pass


def test_a_failing_backend_warns_once_and_the_others_go_on(tmp_path):
    lines = []
    monitor = Monitor(tmp_path / "s.json", 1, [Broken(), Counter()], "fake", "dev", lines.append)
    for _ in range(3):
        monitor._take()
    assert monitor.summary()["gpu_util_max"] == 3.0
    assert [line for line in lines if "sensor gone" in line] == [
        "monitor: broken sampling failed (sensor gone); skipping it"
    ]


def test_the_file_is_rewritten_while_the_run_goes_on(tmp_path, monkeypatch):
    monkeypatch.setattr(recorder, "FLUSH_S", 0.0)  # the thread writes after each sample
    sampler = Counter(enough=3)
    monitor = Monitor(tmp_path / "s.json", 0.05, [sampler], "fake", "dev", lambda _: None)
    monitor.start()
    try:
        assert sampler.enough.wait(60)  # the thread's second sample (a hang guard)
        deadline = time.monotonic() + 60  # its write follows the sample: a hang guard too
        while not (tmp_path / "s.json").exists():
            assert time.monotonic() < deadline
            time.sleep(0.01)
        live = json.loads((tmp_path / "s.json").read_text())  # before stop(): the thread wrote it
    finally:
        monitor.stop()
    assert live["count"] >= 2 and live["samples"][-1]["gpu_util"] == live["count"]
    assert json.loads((tmp_path / "s.json").read_text())["count"] > live["count"]
