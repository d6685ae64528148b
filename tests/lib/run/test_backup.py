"""Checkpoint mirroring to BACKUP_DIR: whole files, only changed ones, never fatal."""

from __future__ import annotations

import os

from lib.run.backup import Backup
from lib.run.checkpoint import load_checkpoint
from lib.train.naming import create_run_dir
from lib.train.trainer import Trainer


def test_mirror_copies_changed_files_whole_and_skips_unchanged(tmp_path):
    run_dir = tmp_path / "results" / "r1"
    run_dir.mkdir(parents=True)
    (run_dir / "ckpt_latest.pt").write_bytes(os.urandom(3 << 20))
    (run_dir / "metrics.json").write_text("{}")
    backup = Backup(str(tmp_path / "mirror"), run_dir, log=lambda _: None)
    assert backup.mirror() == ["metrics.json", "ckpt_latest.pt"]
    dest = tmp_path / "mirror" / "r1"
    assert (dest / "ckpt_latest.pt").read_bytes() == (run_dir / "ckpt_latest.pt").read_bytes()
    assert backup.mirror() == []  # nothing changed
    (run_dir / "metrics.json").write_text('{"status": "completed"}')
    assert backup.mirror() == ["metrics.json"]
    assert (dest / "metrics.json").read_text() == '{"status": "completed"}'
    assert sorted(p.name for p in dest.iterdir()) == ["ckpt_latest.pt", "metrics.json"]  # no temps


def test_empty_backup_dir_is_off(tmp_path):
    (tmp_path / "metrics.json").write_text("{}")
    assert Backup("", tmp_path).mirror() == []


def train(cfg, log):
    run_dir = create_run_dir(cfg)
    return Trainer(cfg, run_dir, log=log).train(), run_dir


def test_a_run_mirrors_its_checkpoints(tiny_run, tmp_path):
    cfg = tiny_run(
        GPT2_MAX_ITERS=10,
        GPT2_EVAL_INTERVAL=5,
        RUN_NAME="mirrored",
        BACKUP_DIR=str(tmp_path / "nas"),
    )
    summary, run_dir = train(cfg, log=lambda _: None)
    dest = tmp_path / "nas" / "mirrored"
    for name in ("ckpt_latest.pt", "ckpt_best.pt", "metrics.json", "config.txt"):
        assert (dest / name).read_bytes() == (run_dir / name).read_bytes(), name
    assert load_checkpoint(dest / "ckpt_latest.pt")["step"] == 10 == summary["iterations"]


def test_a_failing_backup_warns_and_training_goes_on(tiny_run, tmp_path):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the backup folder should be")
    cfg = tiny_run(
        GPT2_MAX_ITERS=10,
        GPT2_EVAL_INTERVAL=5,
        RUN_NAME="unmirrored",
        BACKUP_DIR=str(blocker / "nas"),
    )
    lines: list[str] = []
    summary, run_dir = train(cfg, log=lines.append)
    assert summary["status"] == "completed" and summary["iterations"] == 10
    warnings = [line for line in lines if line.startswith("WARNING: backup of")]
    assert warnings and "training goes on" in warnings[0]
    assert (run_dir / "ckpt_latest.pt").is_file()


def test_only_the_main_process_of_a_distributed_run_copies(tiny_run, tmp_path):
    cfg = tiny_run(BACKUP_DIR=str(tmp_path / "nas"))
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "metrics.json").write_text("{}")
    assert Backup.from_run(cfg.run, tmp_path / "r", main=False).mirror() == []
    assert Backup.from_run(cfg.run, tmp_path / "r", main=True).mirror() == ["metrics.json"]
