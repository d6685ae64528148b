"""A full disk at a record write: metrics.json never loses a field it held, stops
saying "running", and the one paragraph says what each file holds, what the write
needed, what is free and how to go on (lib/run/full_disk.py). The disk is full by
injection here (ENOSPC from every atomic write, 4,096 bytes free); whole runs on a
full disk are in test_durability.py."""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
from pathlib import Path

import pytest

from lib import atomic
from lib.atomic import DiskFullError, json_text
from lib.observe.monitor.recorder import Monitor
from lib.run.full_disk import RESERVE, set_fields
from lib.run.metrics import RunMetrics
from lib.run.resume import not_resumable

ROOT = Path(__file__).resolve().parents[3]
FREE = 4096


def disk_full(monkeypatch, free: int = FREE) -> None:
    """Every atomic write finds no room; the disk reports `free` bytes free."""

    def write(self, data):
        self.error = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        raise self.error

    monkeypatch.setattr(atomic._KeepsWriteError, "write", write)
    monkeypatch.setattr(
        atomic.shutil, "disk_usage", lambda _: shutil._ntuple_diskusage(10**9, 10**9 - free, free)
    )


def run_folder(path: Path, config: str = "") -> Path:
    (path / "config.txt").write_text(config)
    return path


def run_metrics(run_dir: Path, save: bool = True) -> RunMetrics:
    static = {
        "run_id": run_dir.name,
        "fingerprint": "3f9a0c51d2e7",
        "tokens_per_iter": 256,
        "checkpoints": {"save": save, "interval": None},
    }
    return RunMetrics(run_dir / "metrics.json", static)


def train_to(metrics: RunMetrics, step: int) -> dict:
    """The summary a run writes after `step` steps (evaluating every 2)."""
    for it in range(len(metrics.train_loss["iters"]) + 1, step + 1):
        metrics.record_step(0.01, 256)
        metrics.record_train(it, 4.0 - it / 10, 1e-3)
        if it % 2 == 0:
            metrics.record_val(it, 4.1 - it / 10)
    return json.loads(json.dumps(metrics.summary("running", step, step * 256)))


def needs(summary: dict) -> str:
    needed = len(json_text(summary, RESERVE).encode())
    return (
        f"the record needs {needed:,} bytes and the disk has 4,096 free with the partial "
        f"file removed"
    ), f"Free at least {needed - FREE:,} more bytes there"


def resumes(run_dir: Path) -> str:
    return (
        f"then `make continue RUN={run_dir.resolve()}` resumes the run from its last "
        f"checkpoint (from step 0 if it has none yet)."
    )


def test_a_full_disk_at_a_record_write_marks_the_new_record_failed(tmp_path, monkeypatch):
    """The step-6 record fits in the step-4 file's bytes and its reserve: written
    there, every field, status failed, and the message says exactly that."""
    run_dir = run_folder(tmp_path)
    path, metrics = run_dir / "metrics.json", run_metrics(run_dir)
    metrics.write(train_to(metrics, 4))
    assert path.read_bytes().endswith(b"}\n" + b" " * (RESERVE - 1) + b"\n")  # the reserve
    disk_full(monkeypatch)
    summary = train_to(metrics, 6)
    with pytest.raises(DiskFullError) as full:
        metrics.write(summary)
    room, todo = needs(summary)
    message = str(full.value)
    assert message == (
        f"no space left on device for {path}: {room}. metrics.json holds the record "
        f"(step 6), every field, marked failed with this message (written over its own "
        f"bytes: no new file fits). {todo}; {resumes(run_dir)}"
    )
    record = json.loads(path.read_text())
    assert record == {
        **summary,
        "status": "failed",
        "failed_at_step": 6,
        "error": f"DiskFullError: {message}",
    }
    assert record["val_loss"]["iters"] == [2, 4, 6] and record["fingerprint"] == "3f9a0c51d2e7"
    assert full.value.recorded and full.value.__suppress_context__
    assert sorted(p.name for p in run_dir.iterdir()) == ["config.txt", "metrics.json"]


def test_a_record_too_large_for_the_reserve_keeps_the_earlier_one_marked_failed(
    tmp_path, monkeypatch
):
    run_dir = run_folder(tmp_path)
    path, metrics = run_dir / "metrics.json", run_metrics(run_dir)
    metrics.write(train_to(metrics, 4))
    before = json.loads(path.read_text())
    disk_full(monkeypatch)
    summary = train_to(metrics, 6)
    summary["sparsity_series"] = {"iters": list(range(5000)), "values": [0.5] * 5000}
    with pytest.raises(DiskFullError) as full:
        metrics.write(summary)
    message = str(full.value)
    assert (
        ". metrics.json keeps every field of its earlier record (step 4), without the newer "
        "figures, marked failed with this message (written over its own bytes: no new file "
        "fits). "
    ) in message
    assert json.loads(path.read_text()) == {
        **before,
        "status": "failed",
        "failed_at_step": 6,
        "error": f"DiskFullError: {message}",
    }


def test_a_record_without_room_for_the_failure_stays_byte_for_byte(tmp_path, monkeypatch):
    """A record written compactly without the reserve (as by an older version): no
    failure note fits in its bytes, so it stays as it was, and the message says so."""
    run_dir = run_folder(tmp_path)
    path, metrics = run_dir / "metrics.json", run_metrics(run_dir)
    path.write_text(json.dumps(train_to(metrics, 4), separators=(",", ":")))
    before = path.read_bytes()
    disk_full(monkeypatch)
    summary = train_to(metrics, 6)
    with pytest.raises(DiskFullError) as full:
        metrics.write(summary)
    room, todo = needs(summary)
    assert str(full.value) == (
        f"no space left on device for {path}: {room}. metrics.json is unchanged, byte for "
        f"byte: its earlier record (step 4), status running, as the failure does not fit in "
        f"its own bytes. {todo}; {resumes(run_dir)}"
    )
    assert path.read_bytes() == before and full.value.recorded


def test_a_run_without_checkpoints_is_told_it_cannot_resume_and_at_which_step_it_failed(
    tiny_run, tmp_path, monkeypatch
):
    """SAVE_CHECKPOINT off: the record is all the run keeps. The message does not
    promise a resume, and `make continue` names the step the failure came at."""
    config = tiny_run(SAVE_CHECKPOINT="n").config_text
    (tmp_path / "run").mkdir()
    run_dir = run_folder(tmp_path / "run", config)
    metrics = run_metrics(run_dir, save=False)
    metrics.write(train_to(metrics, 4))
    disk_full(monkeypatch)
    summary = train_to(metrics, 6)
    with pytest.raises(DiskFullError) as full:
        metrics.write(summary)
    assert str(full.value).endswith(
        f"; the run saves no checkpoints (SAVE_CHECKPOINT is off), so `make continue "
        f"RUN={run_dir.resolve()}` cannot resume it and says how to train it again."
    )
    refusal = not_resumable(run_dir, [])
    assert refusal is not None and "(it failed after step 6)" in refusal


def test_a_full_disk_at_the_monitor_file_says_how_to_continue_and_keeps_every_field(
    tmp_path, monkeypatch
):
    """cpu_stats.json's write fails at the step-6 summary: its message gives the bytes
    needed and free and the `make continue`; the file is as it was; train.py's
    failure note keeps every field of the step-4 record and the step it came at."""
    run_dir = run_folder(tmp_path)
    stats = run_dir / "cpu_stats.json"
    monitor = Monitor(stats, 1.0, [], "proc", "process", log=lambda _: None)
    monitor.record({"rss_mb": 100.0, "cpu_percent": 50.0}, 1.0)
    monitor.write()
    metrics = run_metrics(run_dir)
    metrics.write(train_to(metrics, 4))
    before, old_stats = json.loads((run_dir / "metrics.json").read_text()), stats.read_bytes()
    monitor.record({"rss_mb": 120.0, "cpu_percent": 70.0}, 2.0)
    disk_full(monkeypatch, free=100)  # less than the stats file needs
    with pytest.raises(DiskFullError) as full:
        monitor.write()
    message = str(full.value)
    head, free = f"no space left on device for {stats}: the file needs ", "100 free"
    tail = f" more bytes there; {resumes(run_dir)}"
    match = re.fullmatch(
        rf"{re.escape(head)}([\d,]+) bytes and the disk has {free} with the partial file "
        rf"removed\. cpu_stats\.json keeps its earlier version, unchanged\. Free at least "
        rf"([\d,]+){re.escape(tail)}",
        message,
    )
    assert match, message
    needed, short = (int(g.replace(",", "")) for g in match.groups())
    assert stats.read_bytes() == old_stats and full.value.__suppress_context__

    _train_script()._record_failure(run_dir, full.value, 6)
    assert json.loads((run_dir / "metrics.json").read_text()) == {
        **before,
        "status": "failed",
        "failed_at_step": 6,
        "error": f"DiskFullError: {message}",
    }
    monkeypatch.undo()  # room again: the same write gives the size the message named
    monitor.write()
    assert needed == stats.stat().st_size and short == needed - 100


def test_the_monitors_last_write_on_a_full_disk_does_not_replace_the_runs_error(
    tmp_path, monkeypatch
):
    """stop() runs in the training loop's `finally`: raising there would replace the
    error the run failed with (one whose record already holds it) by its own."""
    logged: list[str] = []
    monitor = Monitor(tmp_path / "cpu_stats.json", 60.0, [], "proc", "process", logged.append)
    monitor.start()
    monitor.record({"rss_mb": 100.0}, 1.0)
    disk_full(monkeypatch)
    monitor.stop()
    assert [line.split(" (")[0] for line in logged] == [
        f"monitor: cannot write {tmp_path / 'cpu_stats.json'}",
        "monitor",
    ]
    assert not (tmp_path / "cpu_stats.json").exists()


def test_a_status_that_fits_nowhere_leaves_the_record_as_it_was(tmp_path, monkeypatch):
    path = tmp_path / "metrics.json"
    path.write_text('{"status":"running","iterations":4}')
    disk_full(monkeypatch)
    failed = set_fields(path, {"status": "failed", "error": "x" * 100})
    assert failed is not None and failed.endswith(
        "; the fields do not fit in its own bytes either: it is unchanged"
    )
    assert path.read_text() == '{"status":"running","iterations":4}'


def _train_script():
    import importlib.util

    spec = importlib.util.spec_from_file_location("train_script", ROOT / "scripts" / "train.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
