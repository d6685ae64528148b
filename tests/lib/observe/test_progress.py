"""`make watch` views: a run in progress, a finished run, a matrix (hand-written fixtures)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from lib.matrix.watch import render
from lib.observe.progress import run_progress
from lib.run.rundir import RunLog
from lib.train.naming import create_run_dir
from lib.train.trainer import Trainer

ROOT = Path(__file__).resolve().parents[3]
NOW = 1_800_000_000.0


def running_run(folder: Path, it: int = 120, total: int = 300, ms: str = "500.0") -> Path:
    folder.mkdir(parents=True)
    (folder / "output.log").write_text(
        "run r1: gpt2 ...\n"
        f"iter 100/{total} | loss 6.5000 | ppl 665.1 | lr 1.00e-03 | 510.0 ms/iter | 1,500 tok/s\n"
        "eval step 100: val loss 6.4000 | val ppl 601.85 (best)\n"
        f"iter {it}/{total} | loss 6.1234 | ppl 456.2 | lr 9.90e-04 | {ms} ms/iter | 1,536 tok/s"
        " | sparsity 10.0%\n"
    )
    os.utime(folder / "output.log", (NOW - 3, NOW - 3))
    (folder / "metrics.json").write_text(
        json.dumps(
            {
                "run_id": folder.name,
                "status": "running",
                "best_val_loss": 6.4,
                "monitor": {"backend": "nvml", "file": "gpu_stats.json"},
            }
        )
    )
    (folder / "gpu_stats.json").write_text(
        json.dumps(
            {
                "samples": [
                    {"time": NOW - 9, "gpu_util": 50.0},
                    {
                        "time": NOW - 5,
                        "gpu_util": 97.0,
                        "memory_used_mb": 20480.0,
                        "power_w": 612.4,
                        "temperature_c": 66.0,
                    },
                ]
            }
        )
    )
    return folder


def test_a_running_run_shows_progress_and_eta(tmp_path):
    p = run_progress(running_run(tmp_path / "r1"), now=NOW)
    assert (p["iteration"], p["max_iters"], p["loss"]) == (120, 300, 6.1234)
    assert p["tokens_per_sec"] == 1536 and p["eta_s"] == 180 * 0.5
    view = render(tmp_path / "r1", now=NOW)
    assert view.splitlines() == [
        "run r1  [running]",
        "  iteration 120/300 (40.0%) | loss 6.1234 | 1,536 tok/s | ETA 1m 30s",
        "  last eval: step 100, val loss 6.4000 (best 6.4000)",
        "  monitor (5s ago): GPU 97% | 20,480 MiB | 612 W | 66 C",
        "  log updated 3s ago",
    ]


def test_before_the_first_evaluation_the_log_and_stats_file_suffice(tmp_path):
    run_dir = running_run(tmp_path / "gpt2_adamw_none_1")
    (run_dir / "metrics.json").unlink()  # written at the first evaluation only
    (tmp_path / "latest").symlink_to(run_dir.name)
    lines = render(tmp_path / "latest", now=NOW).splitlines()
    assert lines[0] == "run gpt2_adamw_none_1  [running]"
    assert lines[1].startswith("  iteration 120/300") and lines[1].endswith("ETA 1m 30s")
    assert lines[3].startswith("  monitor (5s ago): GPU 97%")


def test_a_run_silent_for_long_is_flagged(tmp_path):
    view = render(running_run(tmp_path / "r1"), now=NOW + 3600)
    assert "log updated 1h 00m ago (no progress since: stopped or killed?)" in view


def test_a_real_finished_run(tiny_run):
    cfg = tiny_run(GPT2_MAX_ITERS=12, GPT2_EVAL_INTERVAL=6, RUN_NAME="watched")
    run_dir = create_run_dir(cfg)
    log = RunLog(run_dir / "output.log")  # the real log format, as `make` writes it
    summary = Trainer(cfg, run_dir, log=log).train()
    log.close()
    p = run_progress(run_dir)
    assert p["status"] == "completed" and (p["iteration"], p["max_iters"]) == (12, 12)
    assert p["loss"] == round(summary["train_loss"]["values"][-1], 4)
    assert "eta_s" not in p and p["last_eval"][0] == 12
    assert p["monitor"]["rss_mb"] > 50  # the run's own cpu_stats.json
    # the script, as `make watch` runs it, through results/latest
    out = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "watch.py"),
            "--once",
            str(run_dir.parent / "latest"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("run watched  [completed]\n  iteration 12/12 (100.0%)")


MATRIX = {
    "matrix_id": "sweep-1",
    "runs": {
        "gpt2_adamw_none": {"state": "completed", "best_val_loss": 5.8812},
        "gpt2_adamwspam_none": {"state": "running"},
        "gpt2_adamwprune_bitter7_state_50": {"state": "pending"},
        "hamt_adamw_none": {"state": "diverged"},
        "gpt2_adamw_magnitude_50": {"state": "pending"},
    },
}


def test_a_matrix_shows_every_run_and_the_running_ones_progress(tmp_path):
    (tmp_path / "matrix.json").write_text(json.dumps(MATRIX))
    running_run(tmp_path / "gpt2_adamwspam_none", it=30, total=300, ms="100.0")
    lines = render(tmp_path, now=NOW).splitlines()
    assert lines[0] == "matrix sweep-1: 1 running, 2 pending, 1 completed, 1 diverged (5 runs)"
    # no base.config to estimate the pending runs from: said, not guessed
    assert lines[1] == "  2 of 5 runs done; time left unknown (no estimate for some runs)"
    assert lines[2].split() == ["completed", "gpt2_adamw_none", "best", "val", "loss", "5.8812"]
    assert lines[3].split()[:2] == ["running", "gpt2_adamwspam_none"]
    assert lines[3].endswith("iteration 30/300 (10.0%) | loss 6.1234 | 1,536 tok/s | ETA 27s")
    assert [line.split()[0] for line in lines[4:]] == ["pending", "diverged", "pending"]


def test_nothing_there_yet(tmp_path):
    assert "no run or matrix there yet" in render(tmp_path / "latest")
