"""Checkpoints are atomic, and a bad one is a clear error."""
from __future__ import annotations

import pytest
import torch

from lib.run.checkpoint import CheckpointError, load_checkpoint, save_checkpoint


def state(step: int) -> dict:
    return {"step": step, "model": {"w": torch.full((3,), float(step))}, "optimizer": {},
            "model_config": {}, "family": "gpt2"}


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
