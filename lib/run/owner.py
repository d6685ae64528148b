"""One live owner per run folder and per matrix folder.

The owner is the process training the run (`make`, `make continue`, or a
matrix's `train.py RUN_DIR=...`) or launching the matrix (`make test-matrix`,
`make continue`, `make test-rerun`). It holds an exclusive flock on
<folder>/.owner.lock for its whole life and writes its PID, host and command
into that file. The kernel drops the lock when the process ends, however it
ends (kill -9 included), so a lock is never stale: a lock file whose lock
nobody holds means "no owner", whatever it still says. A fork shares the
lock; a program started with exec does not inherit it (Python opens files
close-on-exec), so a DDP run re-claims it in torchrun's rank 0. On a shared
filesystem Linux maps flock to NFS locks, which other machines see.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from lib.run.safe_open import open_append

LOCK = ".owner.lock"
# How long a claim retries: another process's owner() probe holds the lock
# for microseconds, and must not make a claim fail.
CLAIM_WAIT_S = 1.0

_held: dict[Path, IO[str]] = {}  # folders this process owns, and their locked files


class Busy(Exception):
    """The folder has a live owner; the message names it and says what to do."""

    def __init__(self, message: str, holder: dict[str, Any]):
        super().__init__(message)
        self.holder = holder


def describe(holder: dict[str, Any]) -> str:
    """'PID 123 on host h (`make continue`, since 12:00:01)'; parts it lacks are left out."""
    pid = holder.get("pid")
    text = f"PID {pid}" if pid else "a process whose PID is not recorded yet"
    if holder.get("host") and holder["host"] != socket.gethostname():
        text += f" on host {holder['host']}"
    extra = [
        f"`{holder['command']}`" if holder.get("command") else "",
        f"since {holder['since']}" if holder.get("since") else "",
    ]
    extra = [e for e in extra if e]
    return text + (f" ({', '.join(extra)})" if extra else "")


def _record(handle: IO[str]) -> dict[str, Any]:
    handle.seek(0)
    try:
        data = json.loads(handle.read() or "{}")
    except ValueError:  # being rewritten by its owner this very moment
        data = {}
    return data if isinstance(data, dict) else {}


def owner(folder: Path) -> dict[str, Any] | None:
    """The live owner's record (pid, host, command, since), or None when no
    process owns the folder. This process's own folders count as owned."""
    folder = Path(folder).resolve()
    if folder in _held:
        return _record(_held[folder])
    try:
        handle = open(folder / LOCK)
    except FileNotFoundError:
        return None
    with handle:
        try:  # shared: probes never block each other, and an owner blocks them
            fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _record(handle)
        except OSError:  # a filesystem without locks: owners cannot be seen
            return None
        fcntl.flock(handle, fcntl.LOCK_UN)
        return None


def claim(folder: Path, busy: Callable[[dict[str, Any]], str], command: str | None = None) -> bool:
    """Own folder until this process ends (or release()). Raises Busy with the
    message busy(owner's record) when a live process owns it. Returns False
    when this process already owned it, True when it took it.
    command: what the lock file says this process is (default: its command line)."""
    folder = Path(folder).resolve()
    if folder in _held:
        return False
    handle = open_append(folder / LOCK, "a+")  # never truncates a file a link leads to
    deadline = time.monotonic() + CLAIM_WAIT_S
    while True:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if time.monotonic() < deadline:
                time.sleep(0.05)
                continue
            holder = _record(handle)
            handle.close()
            raise Busy(busy(holder), holder) from None
        except OSError as err:  # ENOLCK, EOPNOTSUPP: train anyway, unprotected
            print(
                f"warning: cannot lock {folder / LOCK} ({err.strerror}): this filesystem "
                f"cannot stop a second process from training here",
                file=sys.stderr,
            )
            break
    handle.truncate(0)
    handle.write(
        json.dumps(
            {
                "pid": os.getpid(),
                "host": socket.gethostname(),
                "command": command or command_line(),
                "since": time.strftime("%Y-%m-%d %H:%M:%S"),
            }
        )
    )
    handle.flush()
    _held[folder] = handle
    return True


def release(folder: Path) -> None:
    handle = _held.pop(Path(folder).resolve(), None)
    if handle is not None:
        handle.close()  # closing the only descriptor drops the lock


@contextlib.contextmanager
def owning(
    folder: Path, busy: Callable[[dict[str, Any]], str], command: str | None = None
) -> Iterator[None]:
    """Own folder for the block (a matrix launcher); kept if owned before."""
    took = claim(folder, busy, command)
    try:
        yield
    finally:
        if took:
            release(folder)


def command_line() -> str:
    """This process's command, for the lock record: continue.py RUN_NAME=x."""
    words = [Path(sys.argv[0]).name if sys.argv and sys.argv[0] else "python", *sys.argv[1:]]
    return " ".join(words)[:200]
