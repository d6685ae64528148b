"""Monitoring inside a real CPU training run."""

from __future__ import annotations

import json

import torch

from lib.observe.monitor import NullMonitor, build_monitor
from lib.train.naming import create_run_dir
from lib.train.trainer import Trainer


def train(cfg):
    run_dir = create_run_dir(cfg)
    return Trainer(cfg, run_dir, log=lambda _: None).train(), run_dir


def test_cpu_run_records_process_load(tiny_run):
    summary, run_dir = train(
        tiny_run(
            GPT2_MAX_ITERS=20, GPT2_EVAL_INTERVAL=10, MONITOR_INTERVAL_S="0.1", RUN_NAME="monitored"
        )
    )
    stats = json.loads((run_dir / "cpu_stats.json").read_text())
    assert not (run_dir / "gpu_stats.json").exists()
    assert stats["backend"] == "proc" and stats["count"] >= 2
    assert all(s["rss_mb"] > 50 for s in stats["samples"])  # torch alone is larger
    monitor = json.loads((run_dir / "metrics.json").read_text())["monitor"]
    assert monitor == summary["monitor"]
    assert monitor["file"] == "cpu_stats.json" and monitor["samples"] == stats["count"]
    assert monitor["rss_mb_max"] >= monitor["rss_mb_mean"] > 50
    assert monitor["cpu_percent_max"] > 5  # training keeps the process busy
    assert "gpu_util_mean" not in monitor


def test_monitor_off_writes_nothing(tiny_run):
    summary, run_dir = train(
        tiny_run(GPT2_MAX_ITERS=4, GPT2_EVAL_INTERVAL=4, MONITOR="n", RUN_NAME="unmonitored")
    )
    assert summary["monitor"] is None
    assert not (run_dir / "cpu_stats.json").exists() and not (run_dir / "gpu_stats.json").exists()


def test_only_the_main_process_of_a_distributed_run_samples(tiny_run, tmp_path):
    assert isinstance(
        build_monitor(tiny_run().monitor, torch.device("cpu"), tmp_path, main=False), NullMonitor
    )
    assert build_monitor(tiny_run().monitor, torch.device("cpu"), tmp_path).backend == "proc"
