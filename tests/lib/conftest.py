"""A tiny, fast run configuration: char tokens, 2x32 model, synthetic corpus."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from lib.config.kconfig import open_tree
from lib.config.run_config import load_run_config, write_outputs


def synthetic_corpus(path: Path, lines: int = 1500, seed: int = 0) -> Path:
    """Text with learnable structure: a few speakers and a small grammar."""
    rng = random.Random(seed)
    who = ["ROMEO", "JULIET", "NURSE"]
    verbs = ["loves", "sees", "hears", "fears"]
    nouns = ["the moon", "the night", "a rose", "the sun"]
    text = "\n".join(
        f"{rng.choice(who)}: {rng.choice(who).lower()} {rng.choice(verbs)} {rng.choice(nouns)}."
        for _ in range(lines)
    )
    path.write_text(text + "\n")
    return path


@pytest.fixture
def dot_config(tmp_path):
    """A .config with every option at its default."""
    path = tmp_path / ".config"
    write_outputs(open_tree(), path, tmp_path / "config.py")
    return path


@pytest.fixture
def tiny_run(tmp_path):
    """Build a RunConfig for a 2-layer char model on a synthetic corpus in tmp_path."""
    corpus = synthetic_corpus(tmp_path / "corpus.txt")
    config = tmp_path / ".config"
    write_outputs(open_tree(), config, tmp_path / "config.py")
    base = {
        "GPT2_DATASET_CUSTOM": "y",
        "DATA_CUSTOM_PATH": str(corpus),
        "DATA_TOKENIZER_CHAR": "y",
        "DATA_DIR": str(tmp_path / "data"),
        "RESULTS_DIR": str(tmp_path / "results"),
        "GPT2_N_LAYER": "2",
        "GPT2_N_HEAD": "2",
        "GPT2_N_EMBD": "32",
        "GPT2_BLOCK_SIZE": "32",
        "BATCH_SIZE": "8",
        "TRAIN_EVAL_ITERS": "4",
        "TRAIN_LOG_INTERVAL": "1",
        "GPT2_WARMUP_STEPS": "5",
        "LEARNING_RATE": "3e-3",
        "GPT2_MIN_LR": "3e-4",
        "DEVICE_CPU": "y",
    }

    def build(**overrides: str):
        # A choice member the test sets (DEVICE_CUDA=y) replaces the base's member
        # of the same choice (DEVICE_CPU=y): members share the name up to the last "_".
        chosen = {k.rsplit("_", 1)[0] for k, v in overrides.items() if str(v) == "y"}
        defaults = {
            k: v
            for k, v in base.items()
            if not (v == "y" and k.rsplit("_", 1)[0] in chosen and k not in overrides)
        }
        settings = {**defaults, **{k: str(v) for k, v in overrides.items()}}
        if "GPT2_WARMUP_STEPS" not in overrides:  # a warmup must end before the run does
            total = int(settings.get("GPT2_MAX_ITERS", 300))
            settings["GPT2_WARMUP_STEPS"] = str(min(5, total - 1))
        return load_run_config([f"SET={' '.join(f'{k}={v}' for k, v in settings.items())}"], config)

    return build
