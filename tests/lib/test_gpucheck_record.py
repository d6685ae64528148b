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

from lib.bench.gpucheck import record, report, testlog
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
        "def f(x): return x + 1\n"
        "def test_explained(): assert f(f(f(f(f(f(f(0))))))) == 0\n"  # 8 E lines
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
        "failed": 2,
        "skipped": 1,
        "not_reached": 2,  # the one running when killed, and the one after it
        "not_collected": 0,
    }
    assert put["running"].endswith("test_some.py::test_hangs")
    short = {t.split("::")[-1]: outcome for t, outcome in put["tests"].items()}
    assert short == {
        "test_passes": "passed",
        "test_fails": "failed",
        "test_explained": "failed",
        "test_skips": "skipped",
    }
    details = {t.split("::")[-1]: text for t, text in put["details"].items()}
    assert "== 3" in details["test_fails"] and details["test_skips"] == "needs CUDA and fla-core"
    # Its explanation fills the last lines kept; the message leads them.
    explained = details["test_explained"].splitlines()
    assert explained[0] == "E   assert 7 == 0" and explained[-1].endswith(":5: AssertionError")
    assert details["test_fails"].count("E   assert (1 + 1) == 3") == 1  # already kept
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


def _rendered(stages: dict) -> str:
    r = check("2026-11-30 15:58:40 +0000", "abc", {})
    r["environment"].update(torch="2.9", device_name="NVIDIA H200")
    r["stages"] = stages
    return report.render(r, "x.json")


def test_a_failed_tests_why_is_its_exception_message_and_where_it_was_raised():
    # As testlog.py keeps them: the message first when the last lines had lost it.
    details = {
        "t.py::test_backward": "        try:\n>           return run_backward(\n"
        "E           RuntimeError: Trying to backward through the graph a second time "
        "(or directly access saved tensors after they have already been freed). Saved "
        "intermediate values of the graph are freed when you call .backward()\n\n"
        "/opt/torch/.venv/lib/python3.12/site-packages/torch/autograd/graph.py:869: "
        "RuntimeError",
        "t.py::test_close": "E   assert tensor(0.0294, device='cuda:0') <= 0.02\n"
        "E            +  where tensor(0.0294) = max()\n\ntests/hamt/t.py:353: AssertionError",
        # an older record: the message cut off, only the explanation's lines left
        "t.py::test_old": "E            +  where tensor(0.2928) = max()\n\n"
        "tests/hamt/t.py:353: AssertionError",
        "t.py::test_skips": "needs CUDA | fla-core",
    }
    tests = {t: "skipped" if "skips" in t else "failed" for t in details}
    page = _rendered(
        {
            "a": {
                "status": "failed",
                "seconds": 9.0,
                "cap_s": 150,
                "figures": {"tests": tests, "details": details},
            }
        }
    )
    why = {
        line.split("`")[1]: line.split(" | ")[2].removesuffix(" |")
        for line in page.splitlines()
        if line.startswith("| `t.py")
    }
    assert why == {
        "t.py::test_backward": "RuntimeError: Trying to backward through the graph a second time "
        "(or directly access saved tensors after they have already been freed). Saved "
        "intermediate ... (at torch/autograd/graph.py:869)",
        "t.py::test_close": "AssertionError: assert tensor(0.0294, device='cuda:0') <= 0.02 "
        "(at tests/hamt/t.py:353)",
        "t.py::test_old": "tests/hamt/t.py:353: AssertionError",
        "t.py::test_skips": "needs CUDA / fla-core",
    }


def _progress(*phases: tuple[str, float]) -> list[dict]:
    """Phases as figures.Progress puts them: each closed by the next."""
    out = [{"phase": name, "at_s": at} for name, at in phases]
    for phase, following in zip(out, out[1:]):
        phase["seconds"] = following["at_s"] - phase["at_s"]
    return out


def test_a_stage_cut_at_its_cap_shows_the_phase_it_was_in_and_where_its_time_went():
    progress = _progress(
        ("worker start-up (imports)", 0.0),
        ("build models", 6.5),
        ("vanilla 2048 warm-up (compile)", 9.0),
        ("hamt 2048 warm-up (compile)", 80.0),
    )
    stage = {"status": "partial", "seconds": 180.4, "cap_s": 180, "figures": {"progress": progress}}
    page = _rendered({"e": stage})
    assert (
        "Stage e cut at its cap in phase `hamt 2048 warm-up (compile)` (from 80 s on, about "
        "100 s in it). Seconds per phase before it: worker start-up (imports): 6.5; build "
        "models: 2.5; vanilla 2048 warm-up (compile): 71.0." in page
    )
    # A stage that failed closed its last phase; one that ended says nothing of them.
    failed = {**stage, "status": "failed", "figures": {"progress": _progress(("imports", 0.0))}}
    failed["figures"]["progress"][-1]["seconds"] = 3.0
    assert (
        "Stage e failed in phase `imports` (from 0 s on, 3 s in it). Seconds per phase "
        "before it: none." in _rendered({"e": failed})
    )
    assert "Stage e" not in _rendered({"e": {**stage, "status": "done"}})


@pytest.mark.parametrize(
    "path", sorted(record.BENCH_DATA.glob("*/gpu_check_*.json")), ids=lambda p: p.name
)
def test_the_filed_records_still_render(path):
    """Records filed before stages noted their progress render as they did."""
    filed = json.loads(path.read_text())
    page = report.render(filed, path.name)
    assert page.startswith(report.BEGIN) and page.endswith(report.END)
    assert "Stage e cut" not in page and "Seconds per phase" not in page


def test_the_record_names_the_assembler_triton_compiles_with(monkeypatch):
    # Known Hopper miscompiles in fla's backward kernels depend on ptxas's version.
    import types

    asked = []

    def get_ptxas(arch):
        asked.append(arch)
        return types.SimpleNamespace(version="12.9", path="/t/bin/ptxas")

    fake = types.ModuleType("triton.backends.nvidia.compiler")
    fake.get_ptxas = get_ptxas
    monkeypatch.setitem(sys.modules, "triton.backends.nvidia.compiler", fake)
    assert record._ptxas_version((9, 0)) == "12.9 (/t/bin/ptxas)" and asked == [90]
    monkeypatch.setitem(sys.modules, "triton.backends.nvidia.compiler", None)  # no Triton
    assert record._ptxas_version((9, 0)) is None
    r = check("2026-11-30 15:58:40 +0000", "abc", {})
    r["environment"].update(torch="2.9", ptxas="12.9 (/t/bin/ptxas)")
    assert "driver None, Triton's ptxas 12.9, Python" in report.render(r, "x.json")
    assert "ptxas" not in _rendered({})  # records before it, and CPU checks


def test_filing_names_the_earlier_records_of_the_gpu_it_did_not_combine(tmp_path):
    folder = tmp_path / "nvidia-h200"
    folder.mkdir()
    paths = [folder / f"gpu_check_2026113{i}-100000.json" for i in range(3)]
    for path in paths:
        path.write_text("{}")
    (tmp_path / "nvidia-h100").mkdir()
    (tmp_path / "nvidia-h100" / "gpu_check_20261130-100000.json").write_text("{}")
    assert record.not_combined(paths[1:]) == [paths[0]]
    assert record.not_combined(paths) == []


def test_the_page_says_per_stage_what_the_carried_caches_held_and_gave():
    cached = {"files_before": 2783, "files_written": 631}
    page = _rendered(
        {
            "a": {"status": "done", "seconds": 1.0, "cap_s": 9.0, "compile_cache": cached},
            "b": {
                "status": "done",
                "seconds": 1.0,
                "cap_s": 9.0,
                "compile_cache": {
                    **cached,
                    "fxgraph_cache_hit": 7,
                    "fxgraph_cache_miss": 1,
                    "autograd_cache_hit": 6,
                    "autograd_cache_miss": 2,
                },
            },
        }
    )
    assert (
        "per stage: a: 2,783 files before, 631 written; b: 2,783 files before, 631 written, "
        "inductor graphs 7 found / 1 compiled, AOTAutograd graphs 6 / 2." in page
    )
    assert "Compile caches" not in _rendered(
        {"a": {"status": "done", "seconds": 1.0, "cap_s": 9.0}}
    )
