"""Runs scripts/train.py in this process, killed by SIGKILL at one exact point of a write.

For tests/lib/run/test_durability.py. KILL_AT="before|<file>|<n>" kills the process
just before the n-th rename onto <file> (its temporary is whole: a kill during
the write), "after|<file>|<n>" just after it. FSIZE_LIMIT=<bytes> caps every
file this process writes (RLIMIT_FSIZE): a write past it fails with EFBIG, as a
full disk fails with ENOSPC. DISK_FULL_AFTER="<file>|<n>|<how>" fills the disk
just after the n-th rename onto <file>: "inject" makes every later write through
lib/atomic.py fail with ENOSPC, the disk then reporting FREE bytes free; "fill"
fills <file>'s real filesystem (a small tmpfs a test mounted) with a filler
file. DISK_FULL_SNAPSHOT=<path> gets a copy of <file> as it was then.
Arguments go to train.py.
"""

from __future__ import annotations

import errno
import os
import resource
import runpy
import shutil
import signal
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def kill_at(spec: str) -> None:
    when, target, nth = spec.split("|")
    seen, real_replace = 0, os.replace

    def replace(src, dst, **kwargs):
        nonlocal seen
        hit = os.path.abspath(dst) == target and (seen := seen + 1) == int(nth)
        if hit and when == "before":
            os.kill(os.getpid(), signal.SIGKILL)
        real_replace(src, dst, **kwargs)
        if hit and when == "after":
            os.kill(os.getpid(), signal.SIGKILL)

    os.replace = replace


FREE = 4096


def fill(folder: Path) -> None:
    """Write zeros beside folder until its filesystem has no room left."""
    chunk = bytes(4096)
    with open(folder / "filler", "wb", buffering=0) as f:
        try:
            while True:
                f.write(chunk)
        except OSError as err:
            if err.errno != errno.ENOSPC:
                raise


def inject_full_disk() -> None:
    from lib import atomic

    def write(self, data):
        self.error = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        raise self.error

    atomic._KeepsWriteError.write = write
    atomic.shutil.disk_usage = lambda folder: shutil._ntuple_diskusage(10**9, 10**9 - FREE, FREE)


def disk_full_after(spec: str, snapshot: str) -> None:
    target, nth, how = spec.split("|")
    seen, real_replace = 0, os.replace

    def replace(src, dst, **kwargs):
        nonlocal seen
        real_replace(src, dst, **kwargs)
        if os.path.abspath(dst) == target and (seen := seen + 1) == int(nth):
            if snapshot:
                shutil.copyfile(target, snapshot)
            if how == "inject":
                inject_full_disk()
            else:  # the filler goes beside the run folder, on the same filesystem
                fill(Path(target).parent.parent)

    os.replace = replace


if __name__ == "__main__":
    if os.environ.get("KILL_AT"):
        kill_at(os.environ["KILL_AT"])
    if os.environ.get("DISK_FULL_AFTER"):
        disk_full_after(os.environ["DISK_FULL_AFTER"], os.environ.get("DISK_FULL_SNAPSHOT", ""))
    if os.environ.get("FSIZE_LIMIT"):
        limit = int(os.environ["FSIZE_LIMIT"])
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    script = ROOT / "scripts" / "train.py"
    sys.argv = [str(script), *sys.argv[1:]]
    runpy.run_path(str(script), run_name="__main__")
