"""HAMT's `make export`: a checkpoint -> a Hugging Face folder with its model code.

transformers has no holographic-memory model, so the folder carries HAMT's
code (lib/model/remote/, template hamt/remote.py) and loads with
AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=True); plus
the run's own tokenizer (GPT-2's BPE files or tokenizer.json) and the model card,
as GPT-2's export writes them (gpt2/export.py).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any


def export(
    state: dict[str, Any], run_dir: Path, checkpoint: str, out: Path, log: Callable[[str], None]
) -> None:
    """Write the checkpoint `state` of run_dir (ckpt_<checkpoint>.pt) into out."""
    from gpt2.export import save_tokenizer, special_tokens, write_card
    from hamt.config import HAMTConfig
    from hamt.model import HAMT
    from lib.model.remote.folder import save_remote

    config = HAMTConfig(**state["model_config"])
    model = HAMT(config)
    model.load_state_dict(state["model"])
    save_remote(model, "hamt", "hamt.remote", out, **special_tokens(state))
    log(
        "HAMT has no transformers class: exported with its model code, for "
        "AutoModelForCausalLM.from_pretrained(..., trust_remote_code=True)"
    )
    has_tokenizer = save_tokenizer(state, out, config.block_size)
    write_card(out, run_dir, state, checkpoint, model, has_tokenizer, "HAMT", remote_code=True)
