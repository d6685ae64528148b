"""The log line's speed (lib/run/metrics.py's close_window): the steps since the line
before, past the process's warm-up; metrics.json keeps the whole run's."""

from __future__ import annotations

import pytest

from lib.run.metrics import WARMUP_STEPS, RunMetrics


def test_a_resumed_run_logs_its_own_speed_and_records_the_whole_runs(tmp_path):
    slow = RunMetrics(tmp_path / "metrics.json", {"tokens_per_iter": 8})
    for _ in range(WARMUP_STEPS + 10):
        slow.record_step(0.1, 8)  # 80 tokens/s, the first segment's load
    assert slow.close_window() == pytest.approx(80)
    resumed = RunMetrics(tmp_path / "metrics.json", {"tokens_per_iter": 8})
    resumed.load_state_dict(slow.state_dict())
    # the new segment's warm-up alone: the window has no timed step, so all of its own
    for _ in range(WARMUP_STEPS):
        resumed.record_step(0.02, 8)
    assert resumed.close_window() == pytest.approx(400)
    for _ in range(10):
        resumed.record_step(0.01, 8)  # 800 tokens/s now
    assert resumed.close_window() == pytest.approx(800)
    assert resumed.recent_tokens_per_sec == pytest.approx(800)
    # the record: every timed step of both segments, 20 at 0.1 s and 10 at 0.01 s
    assert resumed.tokens_per_sec == pytest.approx(160 / 1.1)
    # a window without steps (two lines at one step) says the whole run's
    assert resumed.close_window() == pytest.approx(160 / 1.1)
