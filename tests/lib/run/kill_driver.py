"""Runs scripts/train.py in this process, killed by SIGKILL at one exact point of a write.

For tests/lib/run/test_durability.py. KILL_AT="before|<file>|<n>" kills the process
just before the n-th rename onto <file> (its temporary is whole: a kill during
the write), "after|<file>|<n>" just after it. FSIZE_LIMIT=<bytes> caps every
file this process writes (RLIMIT_FSIZE): a write past it fails with EFBIG, as a
full disk fails with ENOSPC. Arguments go to train.py.
"""

from __future__ import annotations

import os
import resource
import runpy
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


if __name__ == "__main__":
    if os.environ.get("KILL_AT"):
        kill_at(os.environ["KILL_AT"])
    if os.environ.get("FSIZE_LIMIT"):
        limit = int(os.environ["FSIZE_LIMIT"])
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    script = ROOT / "scripts" / "train.py"
    sys.argv = [str(script), *sys.argv[1:]]
    runpy.run_path(str(script), run_name="__main__")
