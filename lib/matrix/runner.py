"""Run a matrix's runs, each in its own process, one per GPU or one at a time.

Each run is `scripts/train.py RUN_DIR=<run folder>` (which relaunches itself
under torchrun when the run asks for DDP): a crash, an out-of-memory kill or a divergence ends that
process only, and is recorded in matrix.json with its error and the tail of
its log. Children die with the matrix (PR_SET_PDEATHSIG on Linux), so a
killed matrix leaves no orphan writing into its folders; each run then loses
at most the steps since its last checkpoint, and `make continue` resumes it.
"""
from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

from lib.kconfig import ROOT
from lib.matrix.state import MatrixState

TRAIN = ROOT / "scripts" / "train.py"
LOG_TAIL_LINES = 30


def _die_with_parent() -> None:
    """In the child before exec: receive SIGKILL when the matrix process dies."""
    try:
        import ctypes
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:  # not glibc Linux: children may outlive a killed matrix
        pass


def command(run_dir: Path, extra_args: list[str] = (), launcher: list[str] = ()) -> list[str]:
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


def outcome(run_dir: Path, code: int) -> dict[str, Any]:
    """matrix.json fields for a finished process, from metrics.json and the exit code."""
    try:
        metrics = json.loads((run_dir / "metrics.json").read_text())
    except (OSError, ValueError):
        metrics = {}
    status, reason = metrics.get("status"), metrics.get("reason") or ""
    fields: dict[str, Any] = {"exit_code": code, "ended": time.strftime("%Y-%m-%d %H:%M:%S"),
                              "iterations": metrics.get("iterations")}
    if code == 0 and status == "completed":
        return {**fields, "state": "completed", "error": None}
    if code == 0 and status == "stopped" and "TRAIN_MAX_TIME" in reason:
        return {**fields, "state": "completed", "error": None, "note": reason}
    if code == 0 and status == "stopped":  # Ctrl-C: resumes from its checkpoint
        return {**fields, "state": "pending", "error": None, "note": reason}
    if status == "diverged":
        return {**fields, "state": "diverged", "error": reason, "log_tail": log_tail(run_dir)}
    if code < 0:
        name = signal.Signals(-code).name if -code in signal.valid_signals() else str(-code)
        error = f"killed by {name}" + (" (often the kernel's out-of-memory killer)"
                                       if -code == signal.SIGKILL else "")
    else:
        error = metrics.get("error") or f"exit code {code}"
    return {**fields, "state": "failed", "error": error, "log_tail": log_tail(run_dir)}


class Runner:
    """Trains the given runs of a matrix with `jobs` at a time.

    slots: one environment patch per concurrent job (e.g. CUDA_VISIBLE_DEVICES),
    so each GPU trains one run at a time."""

    def __init__(self, state: MatrixState, slots: list[dict[str, str]],
                 echo: bool = True, log: Callable[[str], None] = print,
                 extra_args: list[str] = (), launcher: list[str] = ()):
        self.state, self.slots, self.launcher = state, slots, list(launcher)
        self.extra_args = list(extra_args)  # e.g. MAX_ITERS= given to `make continue`
        self.echo, self.log = echo and len(slots) == 1, log
        self.interrupted = False

    def run_all(self, run_ids: list[str]) -> None:
        todo: queue.Queue[str] = queue.Queue()
        for run_id in run_ids:
            todo.put(run_id)
        workers = [threading.Thread(target=self._worker, args=(todo, slot), daemon=True)
                   for slot in self.slots]
        for w in workers:
            w.start()
        try:
            while any(w.is_alive() for w in workers):
                for w in workers:
                    w.join(timeout=0.2)
        except KeyboardInterrupt:
            # Children got the same SIGINT: they checkpoint and exit; wait for them.
            self.interrupted = True
            self.log("interrupted: waiting for the running runs to save their checkpoints")
            for w in workers:
                w.join()

    def _worker(self, todo: "queue.Queue[str]", slot: dict[str, str]) -> None:
        while not self.interrupted:
            try:
                run_id = todo.get_nowait()
            except queue.Empty:
                return
            self.run_one(run_id, slot)

    def run_one(self, run_id: str, slot: dict[str, str]) -> dict[str, Any]:
        run_dir = self.state.root / run_id
        entry = self.state.runs[run_id]
        self.state.update(run_id, state="running", attempts=entry.get("attempts", 0) + 1,
                          started=time.strftime("%Y-%m-%d %H:%M:%S"), error=None,
                          log_tail=None, env=slot or None)
        where = f" on {', '.join(f'{k}={v}' for k, v in slot.items())}" if slot else ""
        self.log(f"[matrix] {run_id}: started{where}")
        code = self._launch(run_dir, slot)
        result = outcome(run_dir, code)
        self.state.update(run_id, **result)
        self.log(f"[matrix] {run_id}: {result['state']}"
                 f"{': ' + result['error'] if result.get('error') else ''}")
        return result

    def _launch(self, run_dir: Path, slot: dict[str, str]) -> int:
        env = {**os.environ, **slot, "PYTHONUNBUFFERED": "1"}
        with open(run_dir / "console.log", "ab") as console:
            proc = subprocess.Popen(command(run_dir, self.extra_args, self.launcher), cwd=ROOT, env=env,
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    preexec_fn=_die_with_parent if os.name == "posix" else None)
            assert proc.stdout is not None
            while chunk := proc.stdout.read1(65536):
                console.write(chunk)
                if self.echo:
                    sys.stdout.buffer.write(chunk)
                    sys.stdout.buffer.flush()
            while True:
                try:
                    return proc.wait()
                except KeyboardInterrupt:  # the child is saving its checkpoint
                    self.interrupted = True
