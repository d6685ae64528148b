"""Standard streams whose reader may go away while the command works on.

`make | tee log` and Ctrl-C: the signal reaches tee too, which exits first, so the
command's next line meets a closed pipe (BrokenPipeError: Python ignores SIGPIPE).
A run then died before recording anything. lib/cli.py's run_script wraps stdout and
stderr in Console; code that writes bytes to a stream's buffer calls silence().
"""

from __future__ import annotations

import os
from typing import Any


def silence(stream: Any) -> bool:
    """Point `stream`'s descriptor at /dev/null, for it and for whatever else writes
    there, and drop what it buffered for the closed pipe; False when it has none."""
    try:
        fd = stream.fileno()
    except (OSError, ValueError):  # no descriptor (io.UnsupportedOperation is one)
        return False
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, fd)
    os.close(null)
    try:
        stream.flush()  # what was buffered for the pipe goes to /dev/null now
    except OSError:
        pass
    return True


class Console:
    """A text stream that drops what it is given once its reader has gone: the first
    write or flush that meets a closed pipe silences the descriptor, and the command
    goes on (its records and output.log hold what the console would have shown)."""

    def __init__(self, stream: Any):
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            written = self._stream.write(text)
        except BrokenPipeError:
            self._silence()
            return len(text)
        return len(text) if written is None else int(written)  # some streams return None

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._silence()

    def _silence(self) -> None:
        if not silence(self._stream):
            self._stream = open(os.devnull, "w")  # noqa: SIM115 (lives as long as the stream)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)
