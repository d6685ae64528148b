"""gpu-check records: several short checks combined per stage, the commit a
GPU node reports, and stage a's per-test log surviving its time cap."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time

import pytest
import torch

from lib.bench.gpucheck import record, testlog
from lib.bench.gpucheck.gputests import _events, _put_tests, gpu_test_files, missing_imports
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


def test_a_stage_cut_short_is_not_finished(tmp_path):
    filed = tmp_path / "h200" / "gpu_check_20261126-225332.json"
    filed.parent.mkdir()
    filed.write_text(
        json.dumps(check("2026-11-26 22:53:32 +0000", "abc", {"a": "partial", "b": "done"}))
    )
    history = record.history("h200", tmp_path)
    assert history["a"].finished is None and history["a"].partial["commit"] == "abc"
    assert history["b"].finished["commit"] == "abc" and history["b"].partial is None


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
        "@pytest.mark.skip(reason='needs CUDA and fla-core')\n"
        "def test_skips(): pass\n"
        "def test_hangs(): time.sleep(60)\n"
        "def test_after(): pass\n"
    )
    log = tmp_path / "tests.jsonl"
    env = {**os.environ, testlog.ENV: str(log), "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly"]
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
    figures = _put_tests(_events(log), put.__setitem__)
    assert figures["counts"] == {
        "passed": 1,
        "failed": 1,
        "skipped": 1,
        "not_reached": 2,  # the one running when killed, and the one after it
        "not_collected": 0,
    }
    assert put["running"].endswith("test_some.py::test_hangs")
    short = {t.split("::")[-1]: outcome for t, outcome in put["tests"].items()}
    assert short == {"test_passes": "passed", "test_fails": "failed", "test_skips": "skipped"}
    details = {t.split("::")[-1]: text for t, text in put["details"].items()}
    assert "== 3" in details["test_fails"] and details["test_skips"] == "needs CUDA and fla-core"
    assert [t.split("::")[-1] for t in put["not_reached"]] == ["test_hangs", "test_after"]
    # The run that resumes it runs those two; its outcomes join the earlier ones.
    resumed = [
        {"event": "collected", "tests": put["not_reached"]},
        {"event": "end", "test": put["not_reached"][0], "outcome": "passed"},
        {"event": "end", "test": put["not_reached"][1], "outcome": "passed"},
    ]
    again: dict = {}
    figures = _put_tests(resumed, again.__setitem__, dict(put))
    assert figures["counts"]["passed"] == 3 and figures["counts"]["not_reached"] == 0
    assert again["details"] == put["details"]


def test_files_that_import_what_the_node_lacks_are_not_collected(tmp_path):
    """A test file importing (through a project module or its conftest) a
    package this interpreter cannot find is left out, with what it lacks."""
    (tmp_path / "tests" / "lib").mkdir(parents=True)
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "__init__.py").write_text("")
    (tmp_path / "lib" / "harness.py").write_text("import json\nimport not_on_this_node_lm\n")
    (tmp_path / "lib" / "guarded.py").write_text(
        "try:\n    import not_on_this_node_opt\nexcept ImportError:\n    pass\n"
    )
    (tmp_path / "tests" / "conftest.py").write_text("import pytest\n")
    (tmp_path / "tests" / "lib" / "conftest.py").write_text("from lib import guarded\n")
    gpu = "import pytest\n@pytest.mark.gpu\ndef test_x(): pass\n"
    (tmp_path / "tests" / "lib" / "test_eval.py").write_text("from lib.harness import x\n" + gpu)
    (tmp_path / "tests" / "lib" / "test_fine.py").write_text("import lib.guarded\n" + gpu)
    (tmp_path / "tests" / "test_cpu_only.py").write_text("import not_on_this_node_x\n")
    assert gpu_test_files(tmp_path) == ["tests/lib/test_eval.py", "tests/lib/test_fine.py"]
    assert missing_imports("tests/lib/test_eval.py", tmp_path) == ["not_on_this_node_lm"]
    assert missing_imports("tests/lib/test_fine.py", tmp_path) == []


def test_the_check_asks_the_hamt_kernel_test_for_its_short_matrix(monkeypatch):
    """GPU_CHECK_QUICK=1 (stage a sets it): one dtype x the two shapes."""

    def matrix(quick: str) -> list[tuple]:
        monkeypatch.setenv("GPU_CHECK_QUICK", quick)
        spec = importlib.util.spec_from_file_location(
            f"kernel_test_{quick}", ROOT / "tests" / "hamt" / "test_hamt_kernel.py"
        )
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        marks = module.test_chunk_gla_equals_the_torch_scan_on_gpu.pytestmark
        return [tuple(m.args[1]) for m in marks if m.name == "parametrize"]

    full, quick = matrix("0"), matrix("1")
    assert [len(values) for values in full] == [2, 2, 3]  # shapes, dtypes, decays: 12 tests
    assert [len(values) for values in quick] == [2, 1, 1]  # 2 tests
    assert quick[0] == full[0] and quick[1][0][0] is torch.bfloat16
