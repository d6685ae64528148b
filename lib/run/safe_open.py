"""Appending to a file in a run folder, never through a symbolic link.

In a results folder a group shares, anyone in the group can replace a run's
output.log (or its .owner.lock, samples.jsonl) by a link, and an append through
it would write wherever the link leads. O_NOFOLLOW makes the open fail on a link
in the last part of the path instead; the folder above it is resolved once and
checked to lie in the results folder (lib/run/rundir.py). Whole-file records
need none of this: lib/atomic.py renames a new file over a link rather than
writing through it.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import IO, Any


class LinkRefused(OSError):
    """The file to append to is a symbolic link; str() is the whole paragraph."""

    def __str__(self) -> str:
        return str(self.strerror)


def open_append(path: Path | str, mode: str = "a", **kwargs: Any) -> IO[Any]:
    """open(path, mode) for mode "a", "ab" or "a+", created with mode 0666 less
    the umask as open() does, but LinkRefused where path is a symbolic link."""
    access = os.O_RDWR if "+" in mode else os.O_WRONLY
    try:
        fd = os.open(path, access | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o666)
    except OSError as err:
        if err.errno == errno.ELOOP and os.path.islink(path):
            raise LinkRefused(errno.ELOOP, refusal(Path(path)), str(path)) from None
        raise
    return os.fdopen(fd, mode, **kwargs)


def refusal(path: Path) -> str:
    try:
        target = f" to {os.readlink(path)}"
    except OSError:
        target = ""
    return (
        f"{path} is a symbolic link{target}: {path.name} is appended to only as a file "
        f"of its own folder, so that a link (which anyone sharing the results folder can "
        f"make) cannot lead the writes elsewhere. Nothing was written; remove the link "
        f"(`rm {path}`) and run the command again"
    )
