"""Atomic file writes: a reader sees the old file or the new one, never half of one.

Everything is written to a temporary file in the same folder, flushed to disk,
then renamed over the target (rename is atomic within one filesystem).
"""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, Callable, IO


def write_atomic(path: Path | str, write: Callable[[IO[bytes]], Any]) -> None:
    """Call write(fileobj) on a temp file, fsync it, then rename it to path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_text_atomic(path: Path | str, text: str) -> None:
    write_atomic(path, lambda f: f.write(text.encode()))


def write_json_atomic(path: Path | str, obj: Any) -> None:
    write_text_atomic(path, json.dumps(obj, indent=2, sort_keys=False) + "\n")
