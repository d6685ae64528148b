"""A signal sent to make's pid reaches the run make started, and no run outlives make.

The fast tests run the real Makefile with a stub interpreter in PY= that installs the
run's stop handling (lib/run/signals.py) and reports the stop it was asked for; the
slow one stops a real training run through make.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lib.run.signals import EXIT_RESUMABLE
from tests.scripts.conftest import ROOT, make


def _default_signals() -> None:
    # A shell's background job starts with SIGINT ignored, and make keeps an
    # ignored signal ignored: give make the dispositions a terminal gives it.
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)


def _start_make(cwd: Path, *args: str) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MAKE")}
    return subprocess.Popen(
        ["make", "--no-print-directory", "-C", str(cwd), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        preexec_fn=_default_signals,
    )


def _gone(pid: int, timeout_s: float) -> bool:
    """pid has exited (gone, or a zombie nobody reaped yet) within timeout_s."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.05)
    return False


@pytest.fixture
def stub(tmp_path) -> tuple[Path, Path]:
    """PY= for make: handles stop signals as train.py does, writes its pid, then the
    signal it was asked to stop on, and exits as a stopped run does."""
    log, stub = tmp_path / "stub.jsonl", tmp_path / "python"
    stub.write_text(
        f"#!{sys.executable}\n"
        "import json, os, sys, time\n"
        f"sys.path.insert(0, {str(ROOT)!r})\n"
        "from lib.run.signals import STOP, follow_make\n"
        "STOP.install()\n"
        "following = follow_make(0.05) is not None\n"
        f"log = open({str(log)!r}, 'a')\n"
        "log.write(json.dumps([os.getpid(), following]) + '\\n'); log.flush()\n"
        "while STOP.signal is None: time.sleep(0.02)\n"
        "log.write(json.dumps(STOP.signal) + '\\n'); log.flush()\n"
        f"sys.exit({EXIT_RESUMABLE})\n"
    )
    stub.chmod(0o755)
    return stub, log


def _started(log: Path, timeout_s: float = 20) -> tuple[int, bool]:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if log.exists() and log.read_text().strip():
            pid, following = json.loads(log.read_text().splitlines()[0])
            return pid, following
        time.sleep(0.05)
    raise AssertionError("the stub never started")


@pytest.mark.parametrize(
    ("sent", "received"),
    [
        (signal.SIGTERM, "SIGTERM"),  # make passes it on: the recipe execs the script
        (signal.SIGINT, "SIGINT"),  # make does not: follow_make does
        (signal.SIGHUP, "SIGTERM"),
        (signal.SIGKILL, "SIGTERM"),  # make is gone: the run stops, saving
    ],
)
def test_a_signal_to_make_stops_its_run_and_no_run_outlives_make(stub, sent, received):
    py, log = stub
    proc = _start_make(ROOT, f"PY={py}", "continue", "RUN_NAME=x")
    try:
        pid, following = _started(log)
        assert following, "the run started by make does not follow make"
        proc.send_signal(sent)
        proc.wait(timeout=20)
        assert _gone(pid, 10), "the run outlived its make"
        assert json.loads(log.read_text().splitlines()[1]) == received
        if sent != signal.SIGKILL:
            assert f"Error {EXIT_RESUMABLE}" in proc.stderr.read()  # make waited for the run
    finally:
        proc.kill()
        proc.wait()


def test_no_follower_outside_make():
    code = "from lib.run.signals import follow_make; print(follow_make())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.stdout.strip() == "None"


@pytest.mark.slow
@pytest.mark.parametrize("sent", [signal.SIGTERM, signal.SIGINT])
def test_a_real_run_stopped_through_make_keeps_a_checkpoint(project, sent):
    assert make(project, "defconfig-gpt2-tiny-shakespeare").returncode == 0
    proc = _start_make(project, "MAX_ITERS=100000", "COMPILE=n", "RUN_NAME=stopped")
    run = project / "results" / "stopped"
    try:
        end = time.monotonic() + 240
        while time.monotonic() < end and "iter " not in _text(run / "output.log"):
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.2)
        trainers = _children(proc.pid)
        assert trainers, "no trainer under make"
        proc.send_signal(sent)
        proc.wait(timeout=120)
        assert all(_gone(pid, 10) for pid in trainers), "a trainer outlived its make"
    finally:
        proc.kill()
        proc.wait()
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["status"] == "stopped" and metrics["stop_signal"] == signal.Signals(sent).name
    assert (run / "ckpt_latest.pt").exists() and metrics["iterations"] >= 1


def _text(path: Path) -> str:
    return path.read_text() if path.exists() else ""


def _children(pid: int) -> list[int]:
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True)
    return [int(p) for p in out.stdout.split()]


@pytest.mark.slow
def test_a_run_whose_terminal_pipe_closed_stops_with_its_record(project):
    """`make | tee log` and Ctrl-C: the signal reaches tee too, which exits first, so
    the run's next write to its console meets a closed pipe. The run keeps training
    and logging to output.log, and stops on the signal with its checkpoint and record
    (it had ended 'running' or 'failed' on BrokenPipeError, without a checkpoint)."""
    assert make(project, "defconfig-gpt2-tiny-shakespeare").returncode == 0
    env = {k: v for k, v in os.environ.items() if not k.startswith("MAKE")}
    proc = subprocess.Popen(
        ["make", "--no-print-directory", "-C", str(project), "MAX_ITERS=100000", "COMPILE=n"]
        + ["RUN_NAME=piped", "SET=TRAIN_LOG_INTERVAL=1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=env,
        preexec_fn=_default_signals,
    )
    run = project / "results" / "piped"
    try:
        end = time.monotonic() + 240
        while time.monotonic() < end and not _steps_logged(run):
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.2)
        assert proc.stdout is not None
        proc.stdout.close()  # tee is gone
        logged = _steps_logged(run)
        while time.monotonic() < end and _steps_logged(run) < logged + 5:
            assert proc.poll() is None, "the run ended when its console went away"
            time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=120)
    finally:
        proc.kill()
        proc.wait()
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["status"] == "stopped" and metrics["stop_signal"] == "SIGINT", metrics
    assert (run / "ckpt_latest.pt").exists()
    assert "stopped" in _text(run / "output.log").splitlines()[-1]


def _steps_logged(run: Path) -> int:
    return sum(line.startswith("iter ") for line in _text(run / "output.log").splitlines())
