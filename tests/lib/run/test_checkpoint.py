"""Checkpoints are atomic, and a bad one is a clear error."""

from __future__ import annotations

import errno
import io
import os
import shutil
from pathlib import Path

import pytest
import torch

from lib.atomic import DiskFullError
from lib.run.checkpoint import CheckpointError, load_checkpoint, save_checkpoint


def state(step: int) -> dict:
    return {
        "step": step,
        "model": {"w": torch.full((3,), float(step))},
        "optimizer": {},
        "model_config": {},
        "family": "gpt2",
    }


def test_crash_mid_save_leaves_the_previous_checkpoint_loadable(tmp_path, monkeypatch):
    path = tmp_path / "ckpt_latest.pt"
    save_checkpoint(path, state(1))
    real_save = torch.save

    def crash(obj, f):
        real_save(obj, f)
        f.truncate(10)  # half a file on disk, then the process dies
        raise KeyboardInterrupt("killed mid-save")

    monkeypatch.setattr(torch, "save", crash)
    with pytest.raises(KeyboardInterrupt):
        save_checkpoint(path, state(2))
    monkeypatch.setattr(torch, "save", real_save)
    loaded = load_checkpoint(path)
    assert loaded["step"] == 1 and torch.equal(loaded["model"]["w"], torch.ones(3))
    assert [p.name for p in tmp_path.iterdir()] == ["ckpt_latest.pt"]  # no temp file left


def test_truncated_checkpoint_is_a_clear_error(tmp_path):
    path = tmp_path / "ckpt.pt"
    save_checkpoint(path, state(3))
    path.write_bytes(path.read_bytes()[:50])
    with pytest.raises(CheckpointError, match="not a readable checkpoint"):
        load_checkpoint(path)


def test_foreign_file_and_missing_file_are_clear_errors(tmp_path):
    path = tmp_path / "other.pt"
    torch.save({"weights": 1}, path)
    with pytest.raises(CheckpointError, match="missing format, step, model"):
        load_checkpoint(path)
    with pytest.raises(CheckpointError, match="no checkpoint at"):
        load_checkpoint(tmp_path / "absent.pt")


def damage(path) -> None:
    data = bytearray(path.read_bytes())
    data[:64] = bytes(range(64))
    path.write_bytes(bytes(data))


def refusal(path) -> str:
    with pytest.raises(CheckpointError) as err:
        load_checkpoint(path)
    return str(err.value)


def test_a_damaged_checkpoint_names_the_alternative_only_when_it_is_intact(tmp_path):
    best, latest = tmp_path / "ckpt_best.pt", tmp_path / "ckpt_latest.pt"
    save_checkpoint(best, state(4))
    save_checkpoint(latest, state(6))
    damage(best)
    message = refusal(best)
    assert "not a readable checkpoint" in message
    assert "ckpt_latest.pt (step 6) is intact: `CHECKPOINT=latest` reads it" in message

    damage(latest)  # both damaged: no option would help
    message = refusal(best)
    assert "CHECKPOINT=" not in message and "ckpt_latest.pt is damaged too" in message
    assert "train it again" in message

    latest.unlink()
    message = refusal(best)
    assert "CHECKPOINT=" not in message and "ckpt_latest.pt does not exist" in message

    save_checkpoint(best, state(4))  # now the latest is the damaged one
    save_checkpoint(latest, state(6))
    damage(latest)
    message = refusal(latest)
    assert "ckpt_best.pt (step 4) is intact" in message and "CHECKPOINT=best" in message
    assert "CHECKPOINT=latest" not in message and "copy it over ckpt_latest.pt" in message
    best.unlink()
    message = refusal(latest)
    assert "CHECKPOINT=" not in message and "ckpt_best.pt does not exist" in message
    assert f"delete {latest}" in message and "from step 0" in message


def test_a_missing_run_folder_is_not_a_missing_checkpoint(tmp_path):
    assert (
        refusal(tmp_path / "nope" / "ckpt_best.pt")
        == f"there is no run at {tmp_path / 'nope'}: no such folder"
    )


def disk_fills_after(monkeypatch, limit: int, free: int) -> list[list[str]]:
    """Every write of an atomic file fails with ENOSPC once the file would pass limit
    bytes; the disk then reports free bytes. Returns, per free-space query, the
    temporaries that were in the folder then."""
    from lib import atomic

    real_write, seen = atomic._KeepsWriteError.write, []

    def write(self, data):
        if self._f.tell() + len(data) > limit:
            self.error = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            raise self.error
        return real_write(self, data)

    def disk_usage(folder):
        seen.append(sorted(p.name for p in Path(folder).iterdir() if p.name.endswith(".tmp")))
        return shutil._ntuple_diskusage(10**9, 10**9 - free, free)

    monkeypatch.setattr(atomic._KeepsWriteError, "write", write)
    monkeypatch.setattr(atomic.shutil, "disk_usage", disk_usage)
    return seen


def saved_size(step: int) -> int:
    buffer = io.BytesIO()
    torch.save({"format": 1, **state(step)}, buffer)
    return len(buffer.getvalue())


def test_a_full_disk_is_one_paragraph_with_the_bytes_needed_and_free(tmp_path, monkeypatch):
    (tmp_path / "config.txt").write_text("CONFIG_MODEL_GPT2=y\n")  # a run folder
    latest, best = tmp_path / "ckpt_latest.pt", tmp_path / "ckpt_best.pt"
    save_checkpoint(latest, state(2))
    save_checkpoint(best, state(2))
    before = latest.read_bytes()
    queries = disk_fills_after(monkeypatch, limit=600, free=700)
    with pytest.raises(DiskFullError) as full:
        save_checkpoint(latest, state(4))
    message, needed = str(full.value), saved_size(4)
    assert needed > 1000  # the checkpoint, not the 600 bytes written before the failure
    assert message == (
        f"no space left on device for {latest}: the checkpoint needs {needed:,} bytes and the "
        f"disk has 700 free with the partial file removed. Unchanged by the failed write: "
        f"ckpt_latest.pt (step 2) is intact, ckpt_best.pt (step 2) is intact. Free at least "
        f"{needed - 700:,} more bytes there; then `make continue RUN={tmp_path.resolve()}` "
        f"resumes the run."
    )
    assert full.value.__suppress_context__  # no chained tracebacks behind it
    assert queries == [[]]  # free space measured once the partial temporary was gone
    assert latest.read_bytes() == before and load_checkpoint(latest)["step"] == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "ckpt_best.pt",
        "ckpt_latest.pt",
        "config.txt",
    ]


def test_a_full_disk_before_the_first_checkpoint_says_none_exists_yet(tmp_path, monkeypatch):
    disk_fills_after(monkeypatch, limit=100, free=5000)
    with pytest.raises(DiskFullError) as full:
        save_checkpoint(tmp_path / "ckpt_best.pt", state(2))
    message = str(full.value)
    assert f"the checkpoint needs {saved_size(2):,} bytes and the disk has 5,000 free" in message
    assert "No checkpoint exists yet: a resumed run starts again from step 0" in message
    assert "intact" not in message and "make continue" not in message  # not a run folder
    assert list(tmp_path.iterdir()) == []
