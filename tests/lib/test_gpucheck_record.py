"""gpu-check records: several short checks combined per stage, the commit a
GPU node reports, and stage a's per-test log surviving its time cap."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from lib.bench.gpucheck import record, testlog
from lib.bench.gpucheck.stages import _events, _put_tests
from tests.conftest import ROOT


def check(date: str, commit: str, stages: dict, device: str = "NVIDIA H200") -> dict:
    return {
        "environment": {"device": "cuda", "device_name": device, "date": date, "commit": commit},
        "budget_s": 480.0,
        "stages": {
            n: {"status": s, "seconds": 1.0, "cap_s": 9.0, "figures": {"from": commit}}
            for n, s in stages.items()
        },
    }


def test_each_stage_comes_from_its_newest_finished_run():
    first = check("2026-11-26 22:53:32 +0000", "aaa", {"a": "failed", "b": "done", "e": "partial"})
    second = check(
        "2026-11-26 23:00:18 +0000", "bbb", {"a": "done", "b": "partial", "e": "partial"}
    )
    third = check("2026-11-26 23:30:00 +0000", "ccc", {"a": "skipped", "b": "skipped"})
    both = record.combine([third, first, second])
    pick = {n: (s["status"], s["record"]["commit"]) for n, s in both["stages"].items()}
    # a: the newer finished run; b: a finished run beats a newer one cut short;
    # e: cut short twice, the newer.
    assert pick == {"a": ("done", "bbb"), "b": ("done", "aaa"), "e": ("partial", "bbb")}
    assert both["stages"]["b"]["figures"] == {"from": "aaa"}
    assert both["environment"]["commit"] == "ccc" and both["combined"] == 3


def test_records_of_two_gpus_do_not_combine():
    with pytest.raises(ValueError, match="different devices"):
        record.combine(
            [
                check("2026-11-26 22:00:00 +0000", "a", {"a": "done"}),
                check("2026-11-26 23:00:00 +0000", "a", {"a": "done"}, "NVIDIA H100 80GB HBM3"),
            ]
        )


def test_a_stage_cut_short_counts_as_unmeasured(tmp_path):
    filed = tmp_path / "h200" / "gpu_check_20261126-225332.json"
    filed.parent.mkdir()
    filed.write_text(
        json.dumps(check("2026-11-26 22:53:32 +0000", "abc", {"a": "partial", "b": "done"}))
    )
    assert record.measured_stages(tmp_path, current="abc") == {"b"}


def test_gpu_check_commit_names_the_commit_over_stale_git_metadata(monkeypatch):
    monkeypatch.setenv("GPU_CHECK_COMMIT", "0123abcd")
    assert record.commit() == {"commit": "0123abcd", "dirty": None}
    monkeypatch.delenv("GPU_CHECK_COMMIT")
    assert record.commit()["commit"] != "0123abcd"


def test_the_test_log_keeps_what_ended_and_names_the_test_running_when_killed(tmp_path):
    (tmp_path / "test_some.py").write_text(
        "import time, pytest\n"
        "def test_passes(): assert 1 + 1 == 2\n"
        "def test_fails(): assert 1 + 1 == 3\n"
        "@pytest.mark.skip(reason='no GPU')\n"
        "def test_skips(): pass\n"
        "def test_hangs(): time.sleep(60)\n"
    )
    log = tmp_path / "tests.jsonl"
    env = {**os.environ, testlog.ENV: str(log), "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
        + ["-p", "lib.bench.gpucheck.testlog", "-p", "no:xdist", str(tmp_path)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 60
    while not any(e.get("test", "").endswith("test_hangs") for e in _events(log)):
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)  # as the time cap does
    proc.wait()
    put: dict = {}
    counts = _put_tests(_events(log), put.__setitem__)
    assert counts == {"passed": 1, "failed": 1, "skipped": 1}
    assert put["running"].endswith("test_some.py::test_hangs")
    failed = [t for t, s in put["tests"].items() if s == "failed"]
    assert [t.split("::")[-1] for t in failed] == ["test_fails"]
    assert "== 3" in put["failures"][failed[0]]
