"""The matrix end to end: separate processes, failures recorded, resume after
kill -9, continue and rerun; plus how a finished process maps to a state."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from lib.jobs.runner import outcome
from tests.lib.conftest import synthetic_corpus
from tests.lib.matrix.conftest import TINY, write_config
from tests.scripts.conftest import make, project  # noqa: F401 (fixture)

pytestmark = pytest.mark.slow


def _config(project: Path, **symbols: str) -> None:
    synthetic_corpus(project / "corpus.txt", lines=400)
    write_config(
        project / ".config",
        {**TINY, "DATA_CUSTOM_PATH": "corpus.txt", "DATA_DIR": str(project / "data"), **symbols},
    )


def _matrix(project: Path) -> dict:
    return json.loads((project / "results" / "latest" / "matrix.json").read_text())


def test_failing_run_is_recorded_and_the_others_finish(project):
    _config(
        project,
        OPTIMIZER_MODE="multiple",
        OPTIMIZER_ENABLE_ADAMW="y",
        OPTIMIZER_ENABLE_ADAMWPRUNE="y",
        PRUNING_MODE="multiple",
        PRUNING_ENABLE_MAGNITUDE="n",
        MATRIX_ABLATION="DATA_CUSTOM_PATH=corpus.txt,missing.txt",
    )
    dry = make(project, "test-matrix-dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "4 runs" in dry.stdout and "gpt2_adamwprune_bitter7_state_50" in dry.stdout
    assert not (project / "results").exists()  # a dry run runs nothing

    first = make(project, "test-matrix", "YES=1")
    assert first.returncode != 0 and "2 completed, 2 failed" in first.stdout, first.stderr
    runs = _matrix(project)["runs"]
    states = {r: v["state"] for r, v in runs.items()}
    ok = [r for r in states if r.endswith("corpus.txt")]
    bad = [r for r in states if r.endswith("missing.txt")]
    assert {states[r] for r in ok} == {"completed"} and {states[r] for r in bad} == {"failed"}
    assert all("missing.txt does not exist" in runs[r]["error"] for r in bad)
    assert all("run failed" in runs[r]["log_tail"] for r in bad)
    for r in ok:
        metrics = json.loads((project / "results" / "latest" / r / "metrics.json").read_text())
        assert metrics["iterations"] == 12 and metrics["status"] == "completed"

    again = make(project, "continue")
    assert again.returncode != 0 and "0 to run" in again.stdout  # failed ones kept
    assert "RETRY_FAILED=1" in again.stdout

    results = make(project, "results")
    assert results.returncode == 0, results.stderr
    summary = (project / "results" / "latest" / "summary.md").read_text()
    assert summary.count("| failed (") == 2 and summary.count("| completed |") == 2
    for png in ("val_loss", "ppl_vs_sparsity", "memory", "throughput"):
        assert (project / "results" / "latest" / f"{png}.png").stat().st_size > 1000


# On PYTHONPATH for the killed matrix only: a process that has just renamed a
# checkpoint into place stops there, so the kill always lands mid-run. Polling
# alone raced the run's last 36 tiny steps on a fast host (state "completed").
PAUSE_AFTER_CHECKPOINT = """
import os, time
_replace = os.replace
def _then_wait(src, dst, *args, **kwargs):
    _replace(src, dst, *args, **kwargs)
    if os.fspath(dst).endswith("ckpt_latest.pt"):
        time.sleep(600)
os.replace = _then_wait
"""


def test_killed_matrix_resumes_from_checkpoints(project, tmp_path):
    _config(project, GPT2_MAX_ITERS="40", MATRIX_ABLATION="TRAIN_SEED=1,2")
    hook = tmp_path / "pause-after-checkpoint"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(PAUSE_AFTER_CHECKPOINT)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MAKE")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(hook), env.get("PYTHONPATH")]))
    proc = subprocess.Popen(
        ["make", "--no-print-directory", "-C", str(project), "test-matrix", "YES=1"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.time() + 120
    ckpts = []
    while time.time() < deadline and not ckpts:
        ckpts = list((project / "results").glob("matrix_*/*/ckpt_latest.pt"))
        time.sleep(0.2)
    assert ckpts, "no checkpoint appeared"
    os.killpg(proc.pid, signal.SIGKILL)  # power loss: matrix and run die at once
    # (the run waits after its checkpoint: the kill found it before its last step)
    proc.wait()
    killed = ckpts[0].parent.name
    assert _matrix(project)["runs"][killed]["state"] == "running"

    resumed = make(project, "continue")
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr
    runs = _matrix(project)["runs"]
    assert {v["state"] for v in runs.values()} == {"completed"}
    metrics = json.loads((ckpts[0].parent / "metrics.json").read_text())
    assert metrics["iterations"] == 40
    assert [e["event"] for e in metrics["events"]].count("resumed") == 1

    rerun = make(project, "test-rerun", f"TARGET={killed}")
    assert rerun.returncode == 0, rerun.stderr
    assert list(ckpts[0].parent.parent.glob(f"{killed}.prev-*"))  # old folder kept
    metrics = json.loads((ckpts[0].parent / "metrics.json").read_text())
    assert "resumed" not in [e["event"] for e in metrics["events"]]


def _metrics(tmp_path: Path, **fields) -> Path:
    (tmp_path / "metrics.json").write_text(json.dumps(fields))
    (tmp_path / "output.log").write_text("line 1\nline 2\n")
    return tmp_path


@pytest.mark.parametrize(
    "code, fields, state",
    [
        (0, {"status": "completed"}, "completed"),
        (0, {"status": "stopped", "reason": "TRAIN_MAX_TIME=60s reached"}, "completed"),
        (0, {"status": "stopped", "reason": "interrupted (Ctrl-C)"}, "pending"),
        (3, {"status": "diverged", "reason": "training loss is nan"}, "diverged"),
        (1, {"status": "failed", "error": "DataError: x"}, "failed"),
        (-9, {"status": "running"}, "failed"),
    ],
)
def test_process_outcome_maps_to_a_matrix_state(tmp_path, code, fields, state):
    result = outcome(_metrics(tmp_path, **fields), code)
    assert result["state"] == state and result["exit_code"] == code
    if state == "failed":
        assert result["log_tail"] == "line 1\nline 2"
    if code == -9:
        assert result["error"].startswith("killed by SIGKILL")


def test_outcome_survives_malformed_metrics(tmp_path):
    (tmp_path / "metrics.json").write_text("{not json")
    result = outcome(tmp_path, 1)
    assert result["state"] == "failed" and result["error"] == "exit code 1"
