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
owner resumes or finishes. A JSON record may be written with a reserve of
trailing spaces, room that rewrite_in_place() can use when no temporary fits.
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
    space left" ("" for a full disk); recorded: the run's record already holds
    the failure as the message says (lib/run/full_disk.py), so nothing may be
    written over it."""

    free: int | None = None
    written: int = 0
    cause: str = ""
    recorded: bool = False

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


def shortfall(err: DiskFullError, what: str, needed: int) -> tuple[str, str]:
    """(the shortfall, what to do) for a write of `needed` bytes that raised err:
    what needs how much against the bytes free (where the write stopped, for a
    quota or the file size limit, whose limit free bytes do not lift)."""
    if err.free is None:
        return (
            f"{what} needs {needed:,} bytes; the free space could not be measured",
            f"Free at least {needed:,} bytes on that disk",
        )
    if err.cause:
        return (
            f"{what} needs {needed:,} bytes and the write stopped after {err.written:,}",
            "Raise the file size limit (ulimit -f unlimited)"
            if "ulimit" in err.cause
            else "Free space within your quota",
        )
    return (
        f"{what} needs {needed:,} bytes and the disk has {err.free:,} free "
        f"with the partial file removed",
        f"Free at least {needed - err.free:,} more bytes there"
        if needed > err.free
        else "The space is free again (something freed it meanwhile)",
    )


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


def json_text(obj: Any, reserve: int = 0) -> str:
    """obj as a record file holds it: indented JSON and a newline, then `reserve`
    spaces and a newline when reserve > 0 (JSON allows trailing whitespace)."""
    text = json.dumps(obj, indent=2, sort_keys=False) + "\n"
    return text + " " * (reserve - 1) + "\n" if reserve > 0 else text


def write_json_atomic(path: Path | str, obj: Any, reserve: int = 0) -> None:
    write_text_atomic(path, json_text(obj, reserve))


def rewrite_in_place(path: Path | str, text: str) -> bool:
    """Replace a file's bytes without a temporary, only when text fits in the bytes
    the file already holds (which needs no new blocks on most filesystems; not on
    copy-on-write ones such as btrfs or ZFS): the one record write a full disk may
    still allow. False when it was not written and the file is untouched (none
    there, unopenable, text too long); True when written. Not atomic: an OSError
    once the write has begun is raised, and the file may then be damaged, which
    readers report as such."""
    data = text.encode()
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW)  # never through a planted link
    except OSError:
        return False
    try:
        if len(data) > os.fstat(fd).st_size:
            return False
        written = 0
        while written < len(data):  # os.write may write less than it is given
            written += os.write(fd, data[written:])
        os.ftruncate(fd, len(data))
        os.fsync(fd)
        return True
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
