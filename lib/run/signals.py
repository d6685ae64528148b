"""Stop signals: SIGTERM, SIGINT (Ctrl-C) and SIGUSR1 ask a run to stop cleanly.

Whoever stops a run sends one of these: `timeout`, `docker stop`, systemd,
Slurm at a time limit or preemption and `scancel` send SIGTERM; Slurm's
`--signal` warning sends SIGUSR1; a terminal sends SIGINT. The handler only
records the request. The training loop honours it at the next step boundary
(never inside drawing a batch, the optimizer step or an evaluation), saves a
checkpoint and exits with EXIT_RESUMABLE, so what it saved is exactly the
state an uninterrupted run had after that step.

One stop is often delivered more than once at nearly the same moment (a
process group and the parent that forwards it, systemd's cgroup and make):
signals within REPEAT_WINDOW_S of the first count as that one. A signal after
the window abandons the stop at once (raises Abandoned wherever the process
is): no new checkpoint, the previous one stays loadable (writes are atomic).

A run started by make hears a signal sent to make's pid too (follow_make):
GNU make passes SIGTERM on to the command it runs (the recipes `exec` theirs, so
that is the run itself), but not SIGINT or SIGHUP, which it expects the terminal
to have sent the whole process group, and waits for a run that never hears of
them; and a make killed outright leaves its run training unobserved.

Imports nothing heavy: scripts install it before importing torch.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

# EX_TEMPFAIL (sysexits.h): "temporary failure, retry later". A stop signal
# ended the run at a step boundary of its last checkpoint: requeue it and
# resume (`make continue`); not 0 (completed) and not 1 (failed).
EXIT_RESUMABLE = 75
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1)
REPEAT_WINDOW_S = 2.0
WHY = {
    "SIGTERM": "SIGTERM (timeout, docker stop, systemd, scancel or a scheduler)",
    "SIGINT": "SIGINT (Ctrl-C)",
    "SIGUSR1": "SIGUSR1 (Slurm's time-limit warning, sbatch --signal)",
}


class Abandoned(BaseException):
    """A further stop signal while stopping: leave now, saving nothing.
    A BaseException, so `except Exception` recovery code never swallows it."""


class StopRequest:
    """The stop this process was asked for: the first signal's name, if any."""

    def __init__(self) -> None:
        self.signal: str | None = None
        self._first_at = 0.0
        self.abandoned = False
        self.saving = True  # whether the stop leaves a checkpoint (SAVE_CHECKPOINT)
        self._previous: dict[int, Any] = {}

    def handle(self, signum: int, frame: Any = None) -> None:
        name = signal.Signals(signum).name
        now = time.monotonic()
        if self.signal is None:
            self.signal, self._first_at = name, now
            how = (
                "with a checkpoint"
                if self.saving
                else "without a checkpoint (SAVE_CHECKPOINT is off)"
            )
            _say(
                f"{name} received: stopping after the current step {how} "
                f"(send it again after {REPEAT_WINDOW_S:g} s to stop at once)"
            )
            return
        if self.abandoned or now - self._first_at < REPEAT_WINDOW_S:
            return  # the same stop, delivered twice
        self.abandoned = True
        _say(f"{name} received again: stopping at once; the last checkpoint stays")
        raise Abandoned(name)

    def install(self) -> bool:
        """Handle the stop signals from now on; True when this call installed
        them (False when already installed, or off the main thread, where
        Python cannot)."""
        if threading.current_thread() is not threading.main_thread() or self._previous:
            return False
        for sig in STOP_SIGNALS:
            self._previous[sig] = signal.signal(sig, self.handle)
        return True

    def uninstall(self) -> None:
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)
        self._previous.clear()

    @contextlib.contextmanager
    def handling(self) -> Iterator[None]:
        """The signals handled inside the block; uninstalled after it only when
        installed here (train.py installs them first thing, a library caller may not)."""
        installed = self.install()
        try:
            yield
        finally:
            if installed:
                self.uninstall()

    def why(self) -> str:
        return WHY.get(self.signal or "", self.signal or "")


# torchrun (versions with --signals-to-handle, which reads this variable)
# forwards these to its workers; its default list lacks SIGUSR1, which would
# end the agent before the workers could save. Older versions ignore it.
TORCHRUN_ENV = {"PET_SIGNALS_TO_HANDLE": "SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1"}

# The process's one request: train.py installs it first thing, the trainer reads it.
STOP = StopRequest()


# A signal make was sent -> what this run sends itself (it stops on TERM, INT, USR1).
MAKE_SIGNALS = {signal.SIGINT: signal.SIGINT, signal.SIGHUP: signal.SIGTERM}


def _caught(pid: int) -> int | None:
    """The signals pid handles (Linux /proc: SigCgt), or None when unreadable."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("SigCgt:"):
            return int(line.split()[1], 16)
    return None


def follow_make(interval_s: float = 0.5) -> threading.Thread | None:
    """When this process's parent is GNU make: a thread that passes on to it a
    SIGINT or SIGHUP make was sent (as this process's SIGINT or SIGTERM) and stops
    it with SIGTERM when make is gone. None elsewhere (no make, no /proc).

    make resets a fatal signal's handler before it waits for its commands, so
    that handler disappearing from make's SigCgt is the sign it was signalled."""
    parent = os.getppid()
    try:
        name = Path(f"/proc/{parent}/comm").read_text().strip()
    except OSError:
        return None
    caught = _caught(parent)
    if name not in ("make", "gmake") or caught is None:
        return None

    def watch() -> None:
        passed = False
        while True:
            time.sleep(interval_s)
            now = _caught(parent)
            if os.getppid() != parent or now is None:  # make is gone: nobody waits for this run
                os.kill(os.getpid(), signal.SIGTERM)
                return
            for sig, sent in MAKE_SIGNALS.items():
                bit = 1 << (sig - 1)
                if not passed and caught & bit and not now & bit:
                    os.kill(os.getpid(), sent)
                    passed = True

    thread = threading.Thread(target=watch, name="follow-make", daemon=True)
    thread.start()
    return thread


def _say(message: str) -> None:
    """To stderr with one write(2): safe inside a handler, unlike a buffered
    stream that the interrupted code may be writing to."""
    try:
        os.write(2, ("\n" + message + "\n").encode())  # below a progress bar's line
    except OSError:
        pass
