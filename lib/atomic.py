"""Atomic file writes: a reader sees the old file or the new one, never half of one.

Everything is written to a temporary file in the same folder (".<name>.<8 hex>.tmp"),
flushed to disk, then renamed over the target (rename is atomic within one
filesystem) and the folder is synced so the rename survives a power cut.

The temporary is created with mode 0666 less the umask, as open() creates
output.log, so a group sharing a results folder can read every record
(mkstemp's 0600 let only the owner read them).

A write that runs out of room (ENOSPC, EDQUOT, or EFBIG from a file size limit)
raises DiskFullError naming the file and the bytes free once its temporary is
removed; the file it would have replaced is untouched. A process killed mid-write
leaves its temporary behind: remove_stale_temps() clears those when the file's
owner resumes or finishes.
"""

from __future__ import annotations

import errno
import json
import os
import secrets
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, Protocol

TEMP_SUFFIX = ".tmp"
# errno -> what to add to "no space left on device"
_OUT_OF_ROOM = {errno.ENOSPC: "", errno.EFBIG: " (the file size limit, ulimit -f, was reached)"}
if hasattr(errno, "EDQUOT"):
    _OUT_OF_ROOM[errno.EDQUOT] = " (disk quota exceeded)"


class DiskFullError(OSError):
    """A write ran out of room; the file it would have replaced is unchanged.
    An OSError with the failed write's errno and file; its text is the message alone.
    free: the bytes free once the partial temporary was removed (None: unknown);
    written: the bytes the write got through; cause: what the errno adds to "no
    space left" ("" for a full disk)."""

    free: int | None = None
    written: int = 0
    cause: str = ""

    def __str__(self) -> str:
        return str(self.strerror)


class BinaryWriter(Protocol):
    """What a write_atomic callback writes to: a binary file (other file methods
    such as flush reach the file too)."""

    def write(self, data: bytes, /) -> int: ...


class _KeepsWriteError:
    """A file wrapper that remembers the OSError a write raised: torch.save reports
    a failed write as its own "unexpected pos" RuntimeError, without the errno."""

    def __init__(self, f: IO[bytes]):
        self._f = f
        self.error: OSError | None = None

    def write(self, data: Any) -> int:
        try:
            return self._f.write(data)
        except OSError as err:
            self.error = err
            raise

    def __getattr__(self, name: str) -> Any:
        return getattr(self._f, name)


def _temp_name(name: str) -> str:
    return f".{name}.{secrets.token_hex(4)}{TEMP_SUFFIX}"


def _create_temp(path: Path) -> tuple[int, Path]:
    """A new temporary beside path, mode 0666 less the umask (O_EXCL: never a reused name)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    for _ in range(100):
        tmp = path.with_name(_temp_name(path.name))
        try:
            return os.open(tmp, flags, 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, f"no free temporary name beside {path}")


def write_atomic(path: Path | str, write: Callable[[BinaryWriter], Any]) -> None:
    """Call write(fileobj) on a temp file, fsync it, then rename it to path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = _create_temp(path)
    out = None
    try:
        with os.fdopen(fd, "wb") as f:
            out = _KeepsWriteError(f)
            write(out)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as err:
        written = 0
        try:
            written = tmp.stat().st_size
            tmp.unlink()
        except OSError:
            pass
        cause = _out_of_room(err, out)
        if cause is not None:
            raise _disk_full(path, cause, written) from err
        raise
    _sync_folder(path.parent)


def _out_of_room(err: BaseException, out: _KeepsWriteError | None) -> OSError | None:
    for candidate in (err, getattr(out, "error", None), err.__context__):
        if isinstance(candidate, OSError) and candidate.errno in _OUT_OF_ROOM:
            return candidate
    return None


def _disk_full(path: Path, cause: OSError, written: int) -> DiskFullError:
    """Called once the temporary is gone: the free bytes are what a retry would have."""
    assert cause.errno is not None  # _out_of_room picks only errnos in _OUT_OF_ROOM
    free: int | None
    try:
        free = shutil.disk_usage(path.parent).free
    except OSError:
        free = None
    before = (
        f"{path.name} keeps its earlier version"
        if path.exists()
        else f"no {path.name} existed before"
    )
    err = DiskFullError(
        cause.errno,
        f"no space left on device at {path}{_OUT_OF_ROOM[cause.errno]}: "
        f"{'an unknown number of' if free is None else f'{free:,}'} bytes "
        f"free (the write stopped after {written:,} bytes); {before}",
        str(path),
    )
    err.free, err.written, err.cause = free, written, _OUT_OF_ROOM[cause.errno]
    return err


def _sync_folder(folder: Path) -> None:
    """Make the rename durable; some systems and filesystems cannot sync a folder."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def remove_stale_temps(folder: Path | str, names: tuple[str, ...]) -> list[tuple[Path, int]]:
    """Delete the temporaries that killed writes of the named files left in folder;
    returns (path, bytes) of each. Call it only from the process that owns those
    files (a run's lock holder), so that none of them is being written now."""
    folder, removed = Path(folder), []
    prefixes = tuple(f".{name}." for name in names)
    try:
        entries = list(os.scandir(folder))
    except FileNotFoundError:
        return []
    for entry in entries:
        if not (
            entry.name.startswith(prefixes)
            and entry.name.endswith(TEMP_SUFFIX)
            and entry.is_file(follow_symlinks=False)
        ):
            continue
        try:
            size = entry.stat(follow_symlinks=False).st_size
            os.unlink(entry.path)
        except FileNotFoundError:
            continue
        removed.append((Path(entry.path), size))
    return removed


def write_text_atomic(path: Path | str, text: str) -> None:
    write_atomic(path, lambda f: f.write(text.encode()))


def write_json_atomic(path: Path | str, obj: Any) -> None:
    write_text_atomic(path, json.dumps(obj, indent=2, sort_keys=False) + "\n")


def rewrite_in_place(path: Path | str, text: str) -> bool:
    """Replace a file's bytes without a temporary, only when text fits in the bytes
    the file already holds (which needs no new blocks on most filesystems): the one
    record write a full disk may still allow, for a status that must not keep saying
    "running". Not atomic: a crash mid-write leaves a damaged file, which readers
    report as such. Whether it was written."""
    data = text.encode()
    try:
        fd = os.open(path, os.O_WRONLY)
    except OSError:
        return False
    try:
        if len(data) > os.fstat(fd).st_size:
            return False
        os.write(fd, data)
        os.ftruncate(fd, len(data))
        os.fsync(fd)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def read_json_object(path: Path | str) -> dict[str, Any]:
    """A JSON object file's contents; {} when it is missing, unreadable, malformed or
    not an object (readers that must go on past one damaged record: plans, views)."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
