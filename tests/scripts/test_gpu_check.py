"""`make gpu-check DEVICE=cpu`: the record, its files, budget skipping, and
scripts/gpu_report.py rendering docs/benchmarks.md's section from it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lib.bench.gpucheck.plan import STAGES
from lib.bench.gpucheck.report import BEGIN, END
from tests.scripts.conftest import ROOT, make


def check(project: Path, out: Path, *args: str) -> tuple[subprocess.CompletedProcess, dict]:
    shutil.copytree(
        ROOT / "tests", project / "tests", ignore=shutil.ignore_patterns("__pycache__")
    )  # stage a collects them
    # Not conftest's make(): its 300 s limit is below a busy machine's full CPU check;
    # the check's own budget (GPU_CHECK_BUDGET_S, 480 s) bounds it.
    done = subprocess.run(
        [
            "make",
            "--no-print-directory",
            "-C",
            str(project),
            "gpu-check",
            "DEVICE=cpu",
            f"OUT={out}",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "GPU_CHECK_CACHE_ROOT": str(out.parent / "compile-cache")},
    )
    record = json.loads((out / "gpu_check.json").read_text())
    assert len(list(out.iterdir())) <= 8  # what a device call returns
    assert set(record) >= {"environment", "budget_s", "order", "stages", "plots"}
    env = record["environment"]
    assert env["device"] == "cpu" and env["torch"] and env["date"]
    assert env["commit"] == "unknown"  # the scratch copy is no git repository
    return done, record


def report(record_path: Path, tmp_path: Path) -> str:
    page = tmp_path / "benchmarks.md"
    page.write_text(f"# Measured figures\n\nintro\n\n{BEGIN}\nOLD-SECTION\n{END}\n\n## CPU\nkept\n")
    subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "gpu_report.py"),
            str(record_path),
            "--allow-cpu",
            "--bench-data",
            str(tmp_path / "bench-data"),
            "--benchmarks",
            str(page),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    return page.read_text()


@pytest.mark.slow
def test_a_stage_that_would_overrun_the_budget_is_skipped_and_the_report_renders(project, tmp_path):
    # a's cap fits the budget; once a has taken any time, b's cap no longer does.
    budget = STAGES["b"].cpu_cap_s - 1
    assert STAGES["a"].cpu_cap_s <= budget
    done, record = check(project, tmp_path / "out", "STAGES=ab", f"GPU_CHECK_BUDGET_S={budget}")
    stages = record["stages"]
    assert list(stages) == ["a", "b"], done.stdout + done.stderr
    assert stages["b"]["status"] == "skipped" and stages["b"]["seconds"] == 0
    # On a CPU every GPU test skips: the stage says so, each test with its reason.
    assert stages["a"]["status"] == "skipped", stages["a"].get("error")
    a = stages["a"]["figures"]
    assert a["counts"]["failed"] == 0 and a["counts"]["skipped"] == len(a["tests"]) > 5
    assert stages["a"]["reason"].startswith(f"all {len(a['tests'])} GPU tests skipped (")
    assert all(a["details"][t] for t in a["tests"])  # every skip has its reason
    assert "stage a: skipped" in done.stdout and f"({len(a['tests'])} skipped): all" in done.stdout
    assert "DEVICE=cpu: each stage's code path on tiny shapes (GPT-2 " in done.stdout
    assert "nothing to file" in done.stdout and "gpu_report.py" not in done.stdout
    assert "expects to reach a (40 s of caps" in done.stdout
    page = report(tmp_path / "out" / "gpu_check.json", tmp_path)
    assert "OLD-SECTION" not in page and page.endswith("## CPU\nkept\n")
    assert "| b | " in page and "| skipped |" in page
    assert "| every GPU test passes | not met | 0 passed, 0 failed," in page  # all skip on a CPU
    filed = list((tmp_path / "bench-data" / "cpu").glob("gpu_check_*.json"))
    assert (
        len(filed) == 1 and json.loads(filed[0].read_text())["stages"]["b"]["status"] == "skipped"
    )


def test_a_gpu_section_takes_no_cpu_record_by_default(tmp_path):
    path = tmp_path / "gpu_check.json"
    path.write_text(json.dumps({"environment": {"device": "cpu", "device_name": "cpu"}}))
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "gpu_report.py"),
            str(path),
            "--benchmarks",
            str(tmp_path / "b.md"),
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 1 and "not a GPU" in done.stderr and "Traceback" not in done.stderr


def test_bad_stages_and_budget_are_refused_before_anything_runs(project, tmp_path):
    for args, text in (
        (["STAGES=az"], "unknown stage z"),
        (["GPU_CHECK_BUDGET_S=soon"], "seconds"),
    ):
        done = make(project, "gpu-check", "DEVICE=cpu", f"OUT={tmp_path}", *args)
        assert done.returncode != 0 and text in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "gpu_check.json").exists()


@pytest.mark.slow
def test_every_stage_runs_its_code_path_on_a_cpu(project, tmp_path):
    done, record = check(project, tmp_path / "out")
    # on a CPU every GPU test skips, so stage a is recorded as skipped, never done
    stage_a = record["stages"]["a"]
    assert stage_a["status"] == "skipped", stage_a
    failed = {
        n: s.get("error") for n, s in record["stages"].items() if s["status"] != "done" and n != "a"
    }
    assert not failed, failed
    assert sorted(record["order"]) == sorted(STAGES)
    fig = {n: s["figures"] for n, s in record["stages"].items()}
    c = fig["c"]
    assert 0 < c["measured_gib"] < 1 and c["estimate_gib"] > 0 and c["published_gib"] == 25.3
    assert fig["b"]["batch 2"]["ms_per_iter"] > 0 and fig["b"]["batch 2"]["plain_ms_per_iter"] > 0
    assert {"adamw", "adamwspam", "adamwprune"} <= set(fig["d"]["2x1"])
    assert {r["variant"] for r in fig["e"]["rows"]} == {"vanilla", "hamt"}
    assert fig["e"]["torch_scan_rows"][0]["train_tokens_per_sec"] > 0
    assert record["plots"] == ["seqlen.png"] and (tmp_path / "out" / "seqlen.png").exists()
    assert fig["f"]["packing"]["modes"]["auto"]["completed"] == 1
    assert "speed loss plain" in fig["f"] and "inference" in fig["f"]
    assert fig["b"]["loss chunked"]["tokens_per_sec"] > 0  # an MFU candidate, in stage b
    assert fig["e"]["ratios"]["64"]["train_tokens_per_sec"] > 0
    # e's phases, each closed as the stage ended: where its time went
    assert all(p["seconds"] >= 0 for p in fig["e"]["progress"])
    phases = [p["phase"] for p in fig["e"]["progress"]]
    assert phases[0] == "worker start-up (imports)" and "hamt 64 warm-up" in phases
    assert phases[-1] == "torch scan: hamt 32 generation" and len(phases) == 25
    assert "best" in fig["b"] and "micro-batch 4" in fig["b"]
