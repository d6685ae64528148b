"""Stop signals through the matrix and the Slurm executor: the runner forwards
them, its runs checkpoint and are recorded pending (not failed), the sbatch
script asks for a warning signal, and the resumed run equals an uninterrupted one."""

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
from lib.config.run_config import load_run_config
from lib.jobs import slurm
from lib.jobs.runner import outcome
from lib.run.signals import EXIT_RESUMABLE
from lib.train.trainer import Trainer


def _metrics(run_dir: Path, **fields) -> Path:
    (run_dir / "metrics.json").write_text(json.dumps(fields))
    (run_dir / "output.log").write_text("last line\n")
    return run_dir


STOPPED = {
    "status": "stopped",
    "stop_signal": "SIGTERM",
    "reason": "SIGTERM (...): stopped after step 7 of 12 with a checkpoint",
}


@pytest.mark.parametrize(
    "code, fields, forwarded, state",
    [
        (EXIT_RESUMABLE, STOPPED, None, "pending"),  # train.py after a stop signal
        (1, STOPPED, "SIGUSR1", "pending"),  # torchrun exits 1 after a signal
        (-signal.SIGTERM, {"status": "running"}, "SIGTERM", "pending"),  # killed before its handler
        (-signal.SIGTERM, {"status": "running"}, None, "failed"),  # nobody asked it to stop
        (1, {"status": "failed", "error": "DataError: x"}, "SIGTERM", "failed"),
        (0, {"status": "completed"}, "SIGTERM", "completed"),  # finished before the signal
    ],
)
def test_a_stopped_process_is_resumable_not_failed(tmp_path, code, fields, forwarded, state):
    result = outcome(_metrics(tmp_path, **fields), code, time.time() - 1, forwarded)
    assert result["state"] == state and result["exit_code"] == code, result
    if state == "pending":
        assert result["error"] is None and "log_tail" not in result
        assert forwarded is None or forwarded in result["note"]


def test_an_earlier_attempts_stopped_record_is_not_this_ones(tmp_path):
    """metrics.json from a stop before this attempt began: a crash now is a failure."""
    run_dir = _metrics(tmp_path, **STOPPED)
    os.utime(run_dir / "metrics.json", (time.time() - 600, time.time() - 600))
    assert outcome(run_dir, 1, time.time() - 5)["state"] == "failed"
    assert outcome(run_dir, 1, time.time() - 900)["state"] == "pending"


def test_sbatch_script_asks_for_a_warning_signal_to_the_job_process(matrix_config):
    run = load_run_config([], matrix_config(MATRIX_EXECUTOR="slurm", SLURM_TIME_LIMIT="90"))
    script = slurm.render(run, Path("/results/m/r"), "m:r")
    lines = script.splitlines()
    assert "#SBATCH --signal=B:USR1@300" in lines  # SLURM_SIGNAL_SECONDS' default
    # sbatch reads #SBATCH lines up to the first command: all of them come first,
    # and `exec` makes the job process the batch shell that B: signals.
    first_command = next(i for i, line in enumerate(lines) if line and not line.startswith("#"))
    assert all(not line.startswith("#SBATCH") for line in lines[first_command:])
    assert lines[-1].startswith("exec ") and "job RUN_DIR=/results/m/r" in lines[-1]
    short = load_run_config(
        [], matrix_config(MATRIX_EXECUTOR="slurm", SLURM_TIME_LIMIT="4", SLURM_SIGNAL_SECONDS="900")
    )
    assert "#SBATCH --signal=B:USR1@120" in slurm.render(short, Path("/r"), "j").splitlines()


def _wait_for(path: Path, text: str, proc: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if path.is_file() and text in path.read_text(errors="replace"):
            return
        assert proc.poll() is None, f"ended before '{text}': {proc.returncode}"
        time.sleep(0.05)
    raise AssertionError(f"no '{text}' in {path}")


def _entry(run_dir: Path) -> dict:
    return json.loads((run_dir.parent / "matrix.json").read_text())["runs"][run_dir.name]


@pytest.mark.slow
def test_matrix_and_cluster_job_stop_on_signals_and_resume_exactly(matrix_config, tmp_path):
    """SIGTERM to a local matrix, then SIGUSR1 (Slurm's warning) to a cluster
    job's process: each forwards the stop, the run checkpoints, matrix.json says
    pending, and the run, resumed twice, equals an uninterrupted one."""
    config = matrix_config(GPT2_MAX_ITERS="150", GPT2_EVAL_INTERVAL="50", TRAIN_LOG_INTERVAL="1")
    code = (
        "import sys; from pathlib import Path; import lib.rules; from lib.matrix import launch; "
        "sys.exit(launch.start(['YES=1'], lambda _: True, lambda *a: None, "
        f"path=Path({str(config)!r})))"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    matrix = subprocess.Popen(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    deadline = time.time() + 60
    while not list((tmp_path / "results").glob("matrix_*/*/output.log")):
        assert time.time() < deadline and matrix.poll() is None, matrix.stdout.read()
        time.sleep(0.05)
    run_dir = next((tmp_path / "results").glob("matrix_*/*/output.log")).parent
    _wait_for(run_dir / "output.log", "iter 3/150", matrix)
    matrix.send_signal(signal.SIGTERM)
    out, _ = matrix.communicate(timeout=120)
    # Interrupted, neither completed (0) nor failed (1): `make continue` resumes it.
    assert matrix.returncode == EXIT_RESUMABLE, out[-3000:]
    entry, metrics = _entry(run_dir), json.loads((run_dir / "metrics.json").read_text())
    assert entry["state"] == "pending" and entry["exit_code"] == EXIT_RESUMABLE, entry
    assert "SIGTERM" in entry["note"] and entry["error"] is None
    assert metrics["status"] == "stopped" and metrics["stop_signal"] == "SIGTERM"
    first_stop = metrics["iterations"]
    assert 3 <= first_stop < 150

    job = [sys.executable, str(ROOT / "scripts" / "matrix.py"), "job", f"RUN_DIR={run_dir}"]
    cluster = subprocess.Popen(
        job, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    _wait_for(run_dir / "output.log", f"iter {first_stop + 3}/150", cluster)
    cluster.send_signal(signal.SIGUSR1)  # what `#SBATCH --signal=B:USR1@...` sends
    out, _ = cluster.communicate(timeout=120)
    assert cluster.returncode == 0, out[-3000:]
    entry, metrics = _entry(run_dir), json.loads((run_dir / "metrics.json").read_text())
    assert entry["state"] == "pending" and "SIGUSR1" in entry["note"], entry
    assert metrics["status"] == "stopped" and first_stop < metrics["iterations"] < 150

    done = subprocess.run(job, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    assert _entry(run_dir)["state"] == "completed"
    resumed = json.loads((run_dir / "metrics.json").read_text())
    assert [e["step"] for e in resumed["events"] if e["event"] == "resumed"] == [
        first_stop,
        metrics["iterations"],
    ]

    ref_dir = tmp_path / "reference"
    ref_dir.mkdir()
    run = load_run_config([], run_dir / "config.txt")
    whole = Trainer(run, ref_dir, log=lambda _: None).train()
    assert len(whole["train_loss"]["values"]) == 150
    assert resumed["train_loss"] == whole["train_loss"]
    assert resumed["val_loss"] == whole["val_loss"]
