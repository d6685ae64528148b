"""A run's records on a full disk: the status that still reaches metrics.json, and
the one paragraph saying what each file holds afterwards.

metrics.json is written with RESERVE bytes of trailing spaces (lib/atomic.py's
json_text). When no temporary fits any more, the record is rewritten over its
own bytes (rewrite_in_place) with every field it held, its status set to failed
and the error: a failure never shrinks what the record held. A note that does
not fit even so (a record written without the reserve, an error longer than
it) leaves the file byte for byte as it was. Each paragraph is composed for
what was actually written, so that what it says about the files is true.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from lib.atomic import DiskFullError, json_text, rewrite_in_place, shortfall, write_json_atomic

# Bytes of trailing spaces after each metrics.json: room for a failure note with
# the longest error a run writes (a full-disk paragraph naming its paths, ~1 KB).
RESERVE = 4096


def error_text(err: BaseException) -> str:
    """A failure as metrics.json's "error" holds it."""
    return f"{type(err).__name__}: {err}"


def resume_line(run_dir: Path, saves: bool | None) -> str:
    """How the run goes on once there is room ('' outside a run folder); saves:
    whether it writes checkpoints (its record's checkpoints.save; None: unknown)."""
    if not (run_dir / "config.txt").is_file():
        return ""
    from lib.run.rundir import resume_command

    command = resume_command(run_dir)
    if saves is False:
        return (
            f"; the run saves no checkpoints (SAVE_CHECKPOINT is off), so `{command}` "
            f"cannot resume it and says how to train it again"
        )
    return (
        f"; then `{command}` resumes the run from its last checkpoint (from step 0 if it "
        f"has none yet)"
    )


def _saves(record: dict[str, Any] | None) -> bool | None:
    checkpoints = (record or {}).get("checkpoints")
    return checkpoints.get("save") if isinstance(checkpoints, dict) else None


def _read(path: Path) -> dict[str, Any] | None:
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def write_in_place(path: Path, record: dict[str, Any]) -> bool:
    """record over the file's own bytes, indented when that fits, else compact;
    False when neither fits (the file untouched). OSError: the write began and
    failed, and the file may be damaged."""
    compact = json.dumps(record, separators=(",", ":")) + "\n"
    return rewrite_in_place(path, json_text(record)) or rewrite_in_place(path, compact)


def set_fields(path: Path, fields: dict[str, Any]) -> str | None:
    """Set fields of the record at path (made when none exists), atomically, else
    over its own bytes when the disk has no room for a temporary. None when
    written; else what failed, the file left as it was (or damaged, as it says)."""
    record = _read(path) or {}
    record.update(fields)
    try:
        write_json_atomic(path, record, RESERVE)
        return None
    except OSError as err:
        failed = err
    try:
        if write_in_place(path, record):
            return None
    except OSError as err:
        return f"{failed}; rewriting it in place failed too ({err}), and it may be damaged"
    return f"{failed}; the fields do not fit in its own bytes either: it is unchanged"


def _step(record: dict[str, Any]) -> str:
    step = record.get("iterations")
    return f" (step {step})" if isinstance(step, int) else ""


def _recorded(errno: int | None, message: str, path: Path) -> DiskFullError:
    err = DiskFullError(errno, message, str(path))
    err.recorded = True
    return err


def _write_new(path: Path, record: dict[str, Any]) -> bool:
    """A first record without the reserve, which may fit where the whole did not."""
    try:
        write_json_atomic(path, record)
    except OSError:
        return False
    return True


def record_write_failed(path: Path, summary: dict[str, Any], err: DiskFullError) -> DiskFullError:
    """The error for a metrics.json write of summary that found the disk full, once
    the record holds what its message says: summary marked failed when that fits
    in the file's bytes, else the earlier record marked failed, else the file
    unchanged. Its `recorded` is set: train.py writes no failure over it."""
    room, todo = shortfall(err, "the record", len(json_text(summary, RESERVE).encode()))
    head = f"no space left on device for {path}{err.cause}: {room}"
    tail = f"{todo}{resume_line(path.parent, _saves(summary))}."
    step = summary.get("iterations")
    failure: dict[str, Any] = {"status": "failed"}
    if isinstance(step, int):
        failure["failed_at_step"] = step
    old, existed = _read(path), path.exists()
    # What to try, newest first: (record, what the message then says it holds).
    notes = [(summary, f"{path.name} holds the record{_step(summary)}, every field,")]
    if old is not None:
        notes.append(
            (
                old,
                f"{path.name} keeps every field of its earlier record{_step(old)}, without "
                f"the newer figures,",
            )
        )
    how, write = (
        ("written over its own bytes: no new file fits", write_in_place)
        if existed
        else ("written without the spare bytes a record keeps for such notes", _write_new)
    )
    for record, holds in notes:
        message = f"{head}. {holds} marked failed with this message ({how}). {tail}"
        note = {**record, **failure, "error": error_text(_recorded(err.errno, message, path))}
        try:
            if write(path, note):
                return _recorded(err.errno, message, path)
        except OSError as damaged:
            message = (
                f"{head}. {path.name} may be damaged: rewriting it in place failed "
                f"({damaged.strerror or damaged}). {tail}"
            )
            return _recorded(err.errno, message, path)
    if old is not None:
        holds = (
            f"{path.name} is unchanged, byte for byte: its earlier record{_step(old)}, "
            f"status {old.get('status')}, as the failure does not fit in its own bytes"
        )
    elif path.exists():
        holds = f"{path.name} is unchanged, byte for byte (it does not read as a record)"
    else:
        holds = f"no {path.name} existed before, and none was written"
    return _recorded(err.errno, f"{head}. {holds}. {tail}", path)


def file_write_failed(path: Path, what: str, needed: int, err: DiskFullError) -> DiskFullError:
    """The error for an atomic write of needed bytes to a run's file (what: how the
    message names its contents) that found the disk full: the file is as it was."""
    room, todo = shortfall(err, what, needed)
    before = (
        f"{path.name} keeps its earlier version, unchanged"
        if path.exists()
        else f"no {path.name} existed before, and none was written"
    )
    saves = _saves(_read(path.parent / "metrics.json"))
    return DiskFullError(
        err.errno,
        f"no space left on device for {path}{err.cause}: {room}. {before}. "
        f"{todo}{resume_line(path.parent, saves)}.",
        str(path),
    )
