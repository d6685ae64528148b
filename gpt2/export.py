"""GPT-2's `make export`: a checkpoint -> a Hugging Face GPT-2 folder with a model card.

The folder holds config.json, model.safetensors, the GPT-2 BPE tokenizer files
when the run used them, and README.md (gpt2/card.py). It loads with
transformers' GPT2LMHeadModel.from_pretrained. Only vanilla attention has that
layout; the other variants are refused.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

from lib.run.checkpoint import CheckpointError
from lib.eval.record import load_eval


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def export(state: dict[str, Any], run_dir: Path, checkpoint: str, out: Path,
           log: Callable[[str], None]) -> None:
    """Write the checkpoint `state` of run_dir (ckpt_<checkpoint>.pt) into out."""
    from gpt2.card import measured_sparsity, model_card
    from gpt2.config import GPT2Config
    from gpt2.hf import save_gpt2_tokenizer, save_pretrained
    from gpt2.model import GPT2

    config = GPT2Config(**state["model_config"])
    if config.attention != "vanilla":
        raise CheckpointError(f"{run_dir.name} uses {config.attention} attention; only vanilla "
                              f"attention exists in the Hugging Face GPT-2 layout")
    model = GPT2(config)
    model.load_state_dict(state["model"])
    save_pretrained(model, out)
    has_tokenizer = state["tokenizer"].get("name") == "gpt2"
    if has_tokenizer:
        save_gpt2_tokenizer(out, config.block_size)
    config_txt = run_dir / "config.txt"
    card = model_card(run_dir.name, state["step"], f"ckpt_{checkpoint}.pt", state["model_config"],
                      _read_json(run_dir / "metrics.json"), measured_sparsity(model),
                      load_eval(run_dir), config_txt.read_text() if config_txt.is_file() else "",
                      has_tokenizer)
    (out / "README.md").write_text(card)
