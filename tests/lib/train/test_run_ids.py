"""Run ids: two runs started in the same second get their own folders; the last
log line reads the record's nulls as words."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

from lib.run.rundir import RunDirError
from lib.train import naming
from lib.train.trainer import end_line


def test_two_runs_in_the_same_second_get_their_own_ids(tiny_run, monkeypatch):
    second = time.localtime(1_764_000_000)
    monkeypatch.setattr(
        naming, "time", SimpleNamespace(strftime=time.strftime, localtime=lambda now=None: second)
    )
    run = tiny_run()
    first, again, third = (naming.create_run_dir(run) for _ in range(3))
    stamp = time.strftime("%Y%m%d-%H%M%S", second)
    assert first.name.endswith(stamp)
    assert (again.name, third.name) == (f"{first.name}-2", f"{first.name}-3")
    assert all((p / "config.txt").is_file() for p in (first, again, third))
    assert (first.parent / "latest").resolve() == third


def test_a_named_run_still_refuses_a_taken_name(tiny_run):
    run = tiny_run(RUN_NAME="mine")
    naming.create_run_dir(run)
    with pytest.raises(RunDirError, match="already holds a run"):
        naming.create_run_dir(run)


def test_the_last_line_says_a_null_loss_instead_of_nan():
    record = {"status": "diverged", "reason": "loss is nan at step 3", "tokens_per_sec": 1234.4}
    line = end_line({**record, "best_val_loss": None, "best_val_loss_per_char": None}, 3)
    assert line == (
        "diverged: loss is nan at step 3 | step 3 | no best val loss (no evaluation finished "
        "with a finite loss) | 1,234 tok/s"
    )
    done = end_line({**record, "best_val_loss": 2.5, "best_val_loss_per_char": 0.75}, 9)
    assert "| best val loss 2.5000 (0.7500 nats/char) |" in done
