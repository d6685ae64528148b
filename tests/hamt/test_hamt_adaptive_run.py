"""A HAMT run with adaptive slots through the trainer: the model reports its
slot use (aux_metrics), the trainer logs it and records it in metrics.json."""

from __future__ import annotations

import json

from lib.config.kconfig import open_tree
from lib.config.run_config import load_run_config, write_outputs
from lib.train.naming import create_run_dir
from lib.train.trainer import Trainer


def test_slot_use_is_logged_and_recorded(tmp_path):
    corpus = tmp_path / "corpus.txt"
    words = ["the moon", "a rose", "sees", "loves", "ROMEO:", "JULIET:"]
    corpus.write_text(
        "\n".join(" ".join(words[(i * k) % 6] for k in (1, 2, 3)) for i in range(300))
    )
    config = tmp_path / ".config"
    write_outputs(open_tree(), config, tmp_path / "config.py")
    settings = {
        "MODEL_HAMT": "y",
        "HAMT_N_LAYER": "2",
        "HAMT_N_EMBD": "32",
        "HAMT_NUM_SLOTS": "4",
        "HAMT_ADAPTIVE_SLOTS": "y",
        "HAMT_ADAPTIVE_SLOTS_TOPK": "2",
        "GPT2_BLOCK_SIZE": "32",
        "GPT2_DATASET_CUSTOM": "y",
        "DATA_CUSTOM_PATH": str(corpus),
        "DATA_TOKENIZER_CHAR": "y",
        "DATA_DIR": str(tmp_path / "data"),
        "RESULTS_DIR": str(tmp_path / "results"),
        "BATCH_SIZE": "4",
        "GPT2_MAX_ITERS": "6",
        "GPT2_EVAL_INTERVAL": "3",
        "TRAIN_EVAL_ITERS": "2",
        "TRAIN_LOG_INTERVAL": "3",
        "GPT2_WARMUP_STEPS": "2",
        "DEVICE_CPU": "y",
    }
    run = load_run_config([f"SET={' '.join(f'{k}={v}' for k, v in settings.items())}"], config)
    lines: list[str] = []
    run_dir = create_run_dir(run)
    summary = Trainer(run, run_dir, log=lines.append).train()
    assert summary["status"] == "completed"
    metrics = json.loads((run_dir / "metrics.json").read_text())
    for name in ("slot_utilisation", "slots_used", "balance_loss"):
        series = metrics[f"{name}_series"]
        assert series["iters"] == [1, 3, 6], name  # the first step, every interval, the last
    # Top-2 over 4 slots: Switch's loss is 1 when balanced and at most S / k = 2.
    assert all(0.99 < v <= 2.0 for v in metrics["balance_loss_series"]["values"])
    assert all(0 < v <= 1 for v in metrics["slot_utilisation_series"]["values"])
    logged = [line for line in lines if line.startswith("iter 6/6")]
    assert logged and "slot utilisation" in logged[0] and "slots used" in logged[0]
