"""Damaged token files as a user meets them: `make prepare` and `make` say what
was found and what was done, in one paragraph, without a traceback."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.scripts.conftest import make

TINY = (
    "SET=GPT2_DATASET_CUSTOM=y DATA_CUSTOM_PATH=corpus.txt DATA_TOKENIZER_CHAR=y "
    "GPT2_N_LAYER=1 GPT2_N_HEAD=2 GPT2_N_EMBD=32 GPT2_BLOCK_SIZE=32 BATCH_SIZE=64 "
    "GPT2_EVAL_INTERVAL=2 TRAIN_EVAL_ITERS=1 GPT2_WARMUP_STEPS=1"
)


@pytest.mark.slow
def test_damaged_token_files_are_reported_or_prepared_again(project):
    # Over 2 MiB of uint16 tokens per file, so the middle of train.bin is read
    # only by the batches (the first and last MiB are checked on open).
    (project / "corpus.txt").write_text("ROMEO: the moon is bright tonight.\n" * 90_000)
    assert make(project, "defconfig-gpt2-tiny-shakespeare").returncode == 0
    assert make(project, "prepare", TINY).returncode == 0
    folder = next((project / "data").glob("custom_*-char"))
    meta = json.loads((folder / "meta.json").read_text())
    vocab, n = meta["vocab_size"], meta["train_tokens"]
    assert n * 2 > 4 * 2**20

    # An id beyond the vocabulary in the middle: the first batch that reads it stops the run.
    train = np.memmap(folder / "train.bin", dtype=np.uint16, mode="r+")
    train[2**20 : n - 2**20] = vocab + 5
    train.flush()
    del train
    out = make(project, "MAX_ITERS=2", "RUN_NAME=bad", TINY)
    said = out.stdout + out.stderr
    assert out.returncode != 0 and "Traceback" not in said and "IndexError" not in said
    assert f"{folder / 'train.bin'} holds token id {vocab + 5:,} at position " in said
    assert (
        json.loads((project / "results" / "bad" / "metrics.json").read_text())["status"] == "failed"
    )

    # A cut file is ours to prepare again: a notice, then the dataset as it was made.
    with open(folder / "val.bin", "r+b") as f:
        f.truncate(1001)
    out = make(project, "prepare", TINY)
    assert out.returncode == 0, out.stdout + out.stderr
    assert (
        f"data: {folder / 'val.bin'} is 1,001 bytes, but meta.json records "
        f"{meta['val_tokens']:,} tokens"
    ) in out.stdout
    assert "Preparing the dataset again" in out.stdout
    assert (folder / "val.bin").stat().st_size == 2 * meta["val_tokens"]

    # An id beyond the vocabulary at an end is found when the dataset is opened.
    val = np.memmap(folder / "val.bin", dtype=np.uint16, mode="r+")
    val[3] = vocab
    val.flush()
    del val
    out = make(project, "prepare", TINY)
    assert out.returncode != 0 and "Traceback" not in out.stderr
    assert out.stderr.startswith(
        f"error: {folder / 'val.bin'} holds token id {vocab:,} at position 3"
    )
