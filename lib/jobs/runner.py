"""Run a matrix's runs, each in its own process, as many at a time as fit.

Which GPU a run gets, through CUDA_VISIBLE_DEVICES, and when it may start
is lib/jobs/packing.py's decision (MATRIX_RUNS_PER_GPU: one run per GPU,
or several sharing one within their memory estimates); the runner starts
each run in the matrix's order as soon as the packer places it.

Each run is `scripts/train.py RUN_DIR=<run folder>` (which relaunches itself
under torchrun when the run asks for DDP): a crash, an out-of-memory kill or a divergence ends that
process only, and is recorded in matrix.json with its error and the tail of
its log. Children die with the matrix (PR_SET_PDEATHSIG on Linux), so a
killed matrix leaves no orphan writing into its folders; each run then loses
at most the steps since its last checkpoint, and `make continue` resumes it.

A stop signal to the matrix (SIGTERM, SIGINT, SIGUSR1) is forwarded to each
running child, which runs in its own process group so that a terminal's
Ctrl-C or `timeout` reach it through the matrix only: the child finishes its
step, saves a checkpoint and exits with EXIT_RESUMABLE; the matrix starts no
new run, waits for them and records them pending, which `make continue`
resumes. A second signal later is forwarded too: the runs stop at once
(lib/run/signals.py).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from lib.console import silence
from lib.jobs.packing import Packer
from lib.jobs.state import MatrixState
from lib.paths import ROOT, SCRIPTS
from lib.run.safe_open import LinkRefused, open_append
from lib.run.signals import EXIT_RESUMABLE, STOP_SIGNALS, TORCHRUN_ENV, WHY

TRAIN = SCRIPTS / "train.py"
LOG_TAIL_LINES = 30


def _child_setup() -> None:
    """In the child before exec: its own process group (a terminal's Ctrl-C and
    `timeout` signal the matrix's group; the matrix forwards them, once), and
    SIGKILL when the matrix process dies."""
    os.setpgid(0, 0)
    _die_with_parent()


def _die_with_parent() -> None:
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:  # not glibc Linux: children may outlive a killed matrix
        pass


def command(
    run_dir: Path, extra_args: Sequence[str] = (), launcher: Sequence[str] = ()
) -> list[str]:
    """The run's process: train.py, or train.py under a launcher that starts
    the Python processes itself (a cluster's `srun ... torch.distributed.run`)."""
    head = list(launcher) if launcher else [sys.executable]
    return head + [str(TRAIN), f"RUN_DIR={run_dir}", *extra_args]


def log_tail(run_dir: Path, lines: int = LOG_TAIL_LINES) -> str:
    """The last lines of the run's log (output.log, else the console capture)."""
    for name in ("output.log", "console.log"):
        path = run_dir / name
        if path.is_file():
            text = path.read_text(errors="replace").splitlines()
            if text:
                return "\n".join(text[-lines:])
    return ""


def outcome(
    run_dir: Path, code: int, started: float | None = None, forwarded: str | None = None
) -> dict[str, Any]:
    """matrix.json fields for a finished process, from metrics.json and the exit code.

    started: when the process started (time.time()), so that a metrics.json
    left by an earlier attempt is not read as this one's; forwarded: the stop
    signal the matrix received and passed on to the process, if any."""
    path = run_dir / "metrics.json"
    try:
        metrics = json.loads(path.read_text())
        fresh = started is None or path.stat().st_mtime >= started - 1
    except (OSError, ValueError):
        metrics, fresh = {}, False
    if not isinstance(metrics, dict):
        metrics = {}
    status, reason = metrics.get("status"), str(metrics.get("reason") or "")
    fields: dict[str, Any] = {
        "exit_code": code,
        "ended": time.strftime("%Y-%m-%d %H:%M:%S"),
        "iterations": metrics.get("iterations"),
    }
    if code == 0 and status == "completed":
        return {**fields, "state": "completed", "error": None}
    if code == 0 and status == "stopped" and "TRAIN_MAX_TIME" in reason:
        return {**fields, "state": "completed", "error": None, "note": reason}
    if code == 0 and status == "stopped":  # an older run's Ctrl-C (exit 0 before code 75)
        return {**fields, "state": "pending", "error": None, "note": reason}
    if status == "diverged":
        return {**fields, "state": "diverged", "error": reason, "log_tail": log_tail(run_dir)}
    # Stopped by a signal with a checkpoint: EXIT_RESUMABLE from train.py; under
    # torchrun, whose agent exits 1 after a signal, metrics.json says so.
    by_signal = fresh and status == "stopped" and bool(metrics.get("stop_signal"))
    # Ended by the very signal the matrix forwarded, before it could handle it.
    killed = forwarded is not None and code in (-signal.SIGTERM, -signal.SIGINT, 128 + 15, 130)
    if code == EXIT_RESUMABLE or by_signal or killed:
        note = reason or "stopped by a signal before it began training"
        if forwarded:
            note = (
                f"stopped by {WHY.get(forwarded, forwarded)} to the matrix, at step "
                f"{metrics.get('iterations') or 0}; `make continue` resumes it"
            )
        return {**fields, "state": "pending", "error": None, "note": note}
    if code < 0:
        name = signal.Signals(-code).name if -code in signal.valid_signals() else str(-code)
        error = f"killed by {name}" + (
            " (often the kernel's out-of-memory killer)" if -code == signal.SIGKILL else ""
        )
    else:
        error = metrics.get("error") or f"exit code {code}"
    return {**fields, "state": "failed", "error": error, "log_tail": log_tail(run_dir)}


class Runner:
    """Trains the given runs of a matrix where and when `packer` places them
    (the environment it gives, e.g. CUDA_VISIBLE_DEVICES, patches the run's);
    without one, one at a time in this process's environment (a cluster job)."""

    def __init__(
        self,
        state: MatrixState,
        packer: Packer | None = None,
        echo: bool = True,
        log: Callable[[str], None] = print,
        extra_args: Sequence[str] = (),
        launcher: Sequence[str] = (),
    ):
        self.state, self.launcher = state, list(launcher)
        self.packer = packer or Packer([], {}, 1, jobs=1)
        self.extra_args = list(extra_args)  # e.g. MAX_ITERS= given to `make continue`
        # A single run at a time shows its output here as it trains.
        self.echo, self.log = echo and self.packer.most_at_once == 1, log
        self._room = threading.Condition()  # notified when a run ends and frees its place
        self.interrupted = False
        self.signal: str | None = None  # the first stop signal the matrix received
        self._children: set[subprocess.Popen] = set()
        # Reentrant: the handler may run while the main thread holds it.
        self._children_lock = threading.RLock()
        self._previous: dict[int, Any] = {}

    @contextlib.contextmanager
    def _forwarding(self):
        """While runs train: a stop signal to this process stops them cleanly
        (Python handles signals in the main thread only; elsewhere a no-op)."""
        if threading.current_thread() is not threading.main_thread() or self._previous:
            yield
            return
        for sig in STOP_SIGNALS:
            self._previous[sig] = signal.signal(sig, self._on_signal)
        try:
            yield
        finally:
            for sig, previous in self._previous.items():
                signal.signal(sig, previous)
            self._previous.clear()

    def _on_signal(self, signum: int, frame: Any = None) -> None:
        name = signal.Signals(signum).name
        if not self.interrupted:
            # One write(2): the interrupted main thread may be writing to stdout.
            os.write(
                2,
                f"[matrix] {name} received: the running runs finish their step and "
                f"save a checkpoint; no new run starts\n".encode(),
            )
        self.interrupted, self.signal = True, self.signal or name
        with self._children_lock:
            children = list(self._children)
        for proc in children:
            self._forward(proc, signum)

    def _forward(self, proc: subprocess.Popen, signum: int) -> None:
        """SIGTERM, except a plain train.py child gets Ctrl-C as SIGINT: every
        layer between (torchrun, srun) stops its workers on SIGTERM, while srun
        takes one SIGINT as a status request and torchrun may not know SIGUSR1."""
        sig = signal.SIGINT if signum == signal.SIGINT and not self.launcher else signal.SIGTERM
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, sig)

    def run_all(self, run_ids: list[str]) -> None:
        """Start each run once the packer places it; return when every started
        run has ended (after a stop signal no new run starts)."""
        waiting, threads = list(run_ids), []
        with self._forwarding():
            with self._room:
                while waiting and not self.interrupted:
                    picked = self.packer.next(waiting)
                    if picked is None:  # no place now: wait for a run to end
                        self._room.wait(timeout=0.2)
                        continue
                    waiting.remove(picked[0])
                    thread = threading.Thread(target=self._run_placed, args=picked, daemon=True)
                    thread.start()
                    threads.append(thread)
            while any(t.is_alive() for t in threads):
                for t in threads:
                    t.join(timeout=0.2)

    def _run_placed(self, run_id: str, env: dict[str, str]) -> None:
        try:
            self.run_one(run_id, env)
        finally:
            with self._room:
                self.packer.release(run_id)
                self._room.notify()

    def run_one(self, run_id: str, slot: dict[str, str]) -> dict[str, Any]:
        run_dir = self.state.root / run_id
        entry = self.state.runs[run_id]
        self.state.update(
            run_id,
            state="running",
            attempts=entry.get("attempts", 0) + 1,
            started=time.strftime("%Y-%m-%d %H:%M:%S"),
            error=None,
            log_tail=None,
            env=slot or None,
        )
        where = f" with {', '.join(f'{k}={v}' for k, v in slot.items())}" if slot else ""
        self.log(f"[matrix] {run_id}: started{where}")
        started = time.time()
        result: dict[str, Any]
        try:
            with self._forwarding():  # a cluster job's body calls run_one directly
                code = self._launch(run_dir, slot)
        except LinkRefused as err:  # console.log replaced by a link: nothing started
            ended = time.strftime("%Y-%m-%d %H:%M:%S")
            result = {"exit_code": None, "ended": ended, "iterations": None}
            result.update(state="failed", error=str(err))
        else:
            result = outcome(run_dir, code, started, self.signal)
        # The whole process, start-up included: what calibrates the next plan's estimate.
        result["seconds"] = round(time.time() - started, 1)
        self.state.update(run_id, **result)
        self.log(
            f"[matrix] {run_id}: {result['state']}"
            f"{': ' + result['error'] if result.get('error') else ''}"
        )
        return result

    def _launch(self, run_dir: Path, slot: dict[str, str]) -> int:
        env = {**TORCHRUN_ENV, **os.environ, **slot, "PYTHONUNBUFFERED": "1"}
        with open_append(run_dir / "console.log", "ab") as console:  # never through a link
            proc = subprocess.Popen(
                command(run_dir, self.extra_args, self.launcher),
                cwd=ROOT,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                preexec_fn=_child_setup if os.name == "posix" else None,
            )
            with self._children_lock:
                self._children.add(proc)
            if self.interrupted:  # the signal came while this run was being started
                self._forward(proc, signal.SIGTERM)
            try:
                # stdout=PIPE without text mode is a BufferedReader: read1 returns
                # what the child wrote so far instead of waiting for a full block.
                assert isinstance(proc.stdout, io.BufferedReader)
                while chunk := proc.stdout.read1(65536):
                    console.write(chunk)
                    if self.echo:
                        try:
                            sys.stdout.buffer.write(chunk)
                            sys.stdout.buffer.flush()
                        except BrokenPipeError:  # make | tee, and tee is gone (Ctrl-C)
                            self.echo = False  # each run's console file keeps its lines
                            silence(sys.stdout.buffer)
                return proc.wait()
            finally:
                with self._children_lock:
                    self._children.discard(proc)
