"""Under torchrun (gloo on the CPU, 2 ranks) a stop signal that reaches one rank
stops every rank at the same step; the resumed run equals the uninterrupted one."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lib.config.kconfig import ROOT

pytestmark = pytest.mark.slow
SETTINGS = dict(
    GPT2_MAX_ITERS=600,
    GPT2_EVAL_INTERVAL=150,
    BATCH_SIZE=4,
    GPT2_USE_DDP="y",
    GPT2_NUM_GPUS=2,
    GPT2_DROPOUT="0.1",
    RUN_NAME="ddp",
)
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


def _run_dir(tmp_path: Path, run, name: str) -> Path:
    path = tmp_path / "results" / name
    path.mkdir(parents=True)
    (path / "config.txt").write_text(run.config_text)
    return path


def _train(run_dir: Path) -> subprocess.Popen:
    """train.py under torchrun; its console goes to a file (a pipe nobody reads would fill)."""
    with open(run_dir / "console.txt", "ab") as console:
        return subprocess.Popen(
            [sys.executable, "scripts/train.py", f"RUN_DIR={run_dir}"],
            cwd=ROOT,
            env=ENV,
            stdout=console,
            stderr=subprocess.STDOUT,
        )


def _console(run_dir: Path) -> str:
    return (run_dir / "console.txt").read_text(errors="replace")[-3000:]


def _rank(agent: int, rank: int) -> int:
    """The pid of torchrun's worker with LOCAL_RANK=rank."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            environ = (stat.parent / "environ").read_bytes().split(b"\0")
        except (OSError, ValueError, IndexError):
            continue
        if ppid == agent and f"LOCAL_RANK={rank}".encode() in environ:
            return int(stat.parent.name)
    raise AssertionError(f"no rank {rank} under {agent}")


def test_a_signal_to_one_rank_stops_all_ranks_at_the_same_step(tiny_run, tmp_path):
    run = tiny_run(**SETTINGS)
    whole_dir, part_dir = _run_dir(tmp_path, run, "whole"), _run_dir(tmp_path, run, "part")
    assert _train(whole_dir).wait(timeout=300) == 0, _console(whole_dir)
    part = _train(part_dir)
    deadline = time.time() + 120
    while "iter 12/600" not in (
        (part_dir / "output.log").read_text() if (part_dir / "output.log").exists() else ""
    ):
        assert time.time() < deadline and part.poll() is None, _console(part_dir)
        time.sleep(0.05)
    os.kill(_rank(part.pid, 1), signal.SIGTERM)  # rank 1 only: rank 0 learns it between steps
    part.wait(timeout=120)
    stopped = json.loads((part_dir / "metrics.json").read_text())
    assert stopped["status"] == "stopped", _console(part_dir)
    assert stopped["stop_signal"] == "SIGTERM"
    assert "another rank" in stopped["reason"] and 12 <= stopped["iterations"] < 600
    assert part.returncode != 0  # torchrun's 1 after its workers' 75: the matrix reads metrics.json
    assert _train(part_dir).wait(timeout=300) == 0, _console(part_dir)
    final = json.loads((part_dir / "metrics.json").read_text())
    reference = json.loads((whole_dir / "metrics.json").read_text())
    assert final["status"] == "completed" and final["world_size"] == 2
    resumes = [e["step"] for e in final["events"] if e["event"] == "resumed"]
    assert resumes == [stopped["iterations"]]
    assert final["train_loss"] == reference["train_loss"]
    assert final["val_loss"] == reference["val_loss"]
