"""`make` trains for real, `make continue` resumes, `make sample` generates."""

from __future__ import annotations

import json
import re

import pytest

from tests.scripts.conftest import make

QUICK = ["SET=GPT2_EVAL_INTERVAL=2 TRAIN_EVAL_ITERS=2 BATCH_SIZE=4 GPT2_WARMUP_STEPS=1"]


def metrics(project) -> dict:
    return json.loads((project / "results" / "latest" / "metrics.json").read_text())


@pytest.mark.slow
def test_make_trains_continues_and_samples(project):
    assert make(project, "defconfig-gpt2-tiny-shakespeare").returncode == 0
    first = make(project, "MAX_ITERS=4", "RUN_NAME=e2e", *QUICK)
    assert first.returncode == 0, first.stdout + first.stderr
    run_dir = project / "results" / "e2e"
    assert (project / "results" / "latest").resolve() == run_dir
    for name in ("output.log", "config.txt", "metrics.json", "ckpt_latest.pt", "ckpt_best.pt"):
        assert (run_dir / name).is_file(), name
    m = metrics(project)
    assert m["status"] == "completed" and m["iterations"] == 4 and m["params"] > 1_000_000
    # the default's own tokenizer: a BPE of the size its defconfig asks, trained on the plays
    defconfig = (project / "defconfigs" / "gpt2-tiny-shakespeare").read_text()
    (size,) = re.findall(r"^CONFIG_DATA_BPE_VOCAB_SIZE=(\d+)$", defconfig, re.M)
    assert m["tokenizer"] == "bpe" and m["model_config"]["vocab_size"] == int(size)
    assert "CONFIG_GPT2_MAX_ITERS=4" in (run_dir / "config.txt").read_text()
    log = (run_dir / "output.log").read_text()
    assert "iter 4/4 | loss" in log and "\r" not in log and "\x1b" not in log
    assert "effective batch 4 = batch 4 x accumulation 1 x world 1" in log

    more = make(project, "continue", "MAX_ITERS=6")
    assert more.returncode == 0, more.stdout + more.stderr
    m = metrics(project)
    assert m["iterations"] == 6 and m["status"] == "completed"
    assert [e["event"] for e in m["events"]] == ["resumed"]
    assert m["val_loss"]["iters"] == [2, 4, 6]

    sample = make(project, "sample", "PROMPT=ROMEO:", "TOKENS=5")
    assert sample.returncode == 0, sample.stderr
    assert "--- sample 1 (step" in sample.stdout and "ROMEO:" in sample.stdout


def test_dry_run_prints_the_run_and_trains_nothing(project):
    assert make(project, "defconfig-gpt2-tiny-shakespeare").returncode == 0
    out = make(project, "DRY_RUN=1", "MAX_ITERS=9", "SET=GPT2_WARMUP_STEPS=2")
    assert out.returncode == 0, out.stderr
    assert "CONFIG_GPT2_MAX_ITERS=9" in out.stdout and "effective batch 12" in out.stdout
    assert not (project / "results").exists() and not (project / "data").exists()


@pytest.mark.slow  # test_verdict.py has the fast one of `make prepare` offline
def test_unreachable_hub_dataset_fails_at_once_and_leaves_nothing(project):
    assert make(project, "defconfig-gpt2-vanilla-baseline").returncode == 0
    out = make(project, "DEVICE=cpu", env={"HF_HUB_OFFLINE": "1"})
    assert out.returncode != 0
    assert "finewebedu" in out.stderr and "shakespeare" in out.stderr
    assert not (project / "results").exists()
    assert not any((project / "data").glob("*")) if (project / "data").exists() else True


@pytest.mark.slow
def test_existing_run_name_is_never_overwritten(project):
    assert make(project, "defconfig-gpt2-tiny-shakespeare").returncode == 0
    assert make(project, "MAX_ITERS=2", "RUN_NAME=once", *QUICK).returncode == 0
    again = make(project, "MAX_ITERS=2", "RUN_NAME=once", *QUICK)
    assert again.returncode != 0 and "already holds a run" in again.stderr
