"""GPT-2's `make export`: a checkpoint -> a Hugging Face folder with a model card.

Vanilla attention with GPT-2's architecture has transformers' own layout:
config.json and model.safetensors that GPT2LMHeadModel.from_pretrained
loads (gpt2/hf.py). Every other attention variant (MLA, RA in both forms,
RA+MLA, the output gate) and every model with an architecture option away
from GPT-2's (RoPE, RMSNorm, SwiGLU, grouped-query attention, QK-norm, an
untied head, a norm eps other than 1e-5: GPT2Config.gpt2_layout) has none,
so the folder carries its model code instead
(lib/model/remote/): AutoModelForCausalLM.from_pretrained(folder,
trust_remote_code=True) loads it. Both get the run's own tokenizer (GPT-2's
BPE files, or tokenizer.json for a trained BPE or characters) and README.md
(gpt2/card.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lib.run.eval_record import load_eval


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def write_card(
    out: Path,
    run_dir: Path,
    state: dict[str, Any],
    checkpoint: str,
    model: Any,
    has_tokenizer: bool,
    architecture: str,
    remote_code: bool,
) -> None:
    """README.md from what the run recorded (shared with hamt/export.py)."""
    from gpt2.card import measured_sparsity, model_card

    config_txt = run_dir / "config.txt"
    card = model_card(
        run_dir.name,
        state["step"],
        f"ckpt_{checkpoint}.pt",
        state["model_config"],
        _read_json(run_dir / "metrics.json"),
        measured_sparsity(model),
        load_eval(run_dir),
        config_txt.read_text() if config_txt.is_file() else "",
        has_tokenizer,
        architecture,
        state["family"],
        remote_code,
    )
    (out / "README.md").write_text(card)


def special_tokens(state: dict[str, Any]) -> dict[str, int | None]:
    """config.json's bos/eos/pad ids: the tokenizer's end-of-text token, or none where
    it has none (characters); generate then stops there, as transformers' GPT-2 does."""
    eot = state["tokenizer"].get("eot_token")
    return {"bos_token_id": eot, "eos_token_id": eot, "pad_token_id": eot}


def save_tokenizer(state: dict[str, Any], out: Path, max_length: int) -> bool:
    """The run's own tokenizer, as AutoTokenizer loads it: GPT-2's published BPE files,
    else tokenizer.json (a trained BPE, characters); whether one was written."""
    from gpt2.hf import save_gpt2_tokenizer
    from lib.data.tokenizers import tokenizer_from_meta

    if state["tokenizer"].get("name") == "gpt2":
        save_gpt2_tokenizer(out, max_length)
        return True
    tokenizer = tokenizer_from_meta(state["tokenizer"])
    hf = tokenizer.hf_tokenizer()
    if hf is None:
        return False
    from transformers import PreTrainedTokenizerFast

    eot = None if tokenizer.eot_token is None else hf.id_to_token(tokenizer.eot_token)
    PreTrainedTokenizerFast(
        tokenizer_object=hf,
        model_max_length=max_length,
        bos_token=eot,
        eos_token=eot,
        pad_token=eot,
        clean_up_tokenization_spaces=False,  # would drop the space before "," and "."
    ).save_pretrained(out)
    return True


def export(
    state: dict[str, Any], run_dir: Path, checkpoint: str, out: Path, log: Callable[[str], None]
) -> None:
    """Write the checkpoint `state` of run_dir (ckpt_<checkpoint>.pt) into out."""
    from gpt2.config import GPT2Config
    from gpt2.hf import save_pretrained
    from gpt2.model import GPT2
    from lib.model.remote.folder import save_remote

    config = GPT2Config(**state["model_config"])
    model = GPT2(config)
    model.load_state_dict(state["model"])
    remote = not config.gpt2_layout
    what = (
        f"{config.attention} attention"
        if config.attention != "vanilla"
        else "GPT-2 with " + ", ".join(architecture_options(config))
    )
    if remote:
        save_remote(model, "gpt2", "gpt2.remote", out, **special_tokens(state))
        log(
            f"{what} has no GPT2LMHeadModel layout: exported with its "
            f"model code, for AutoModelForCausalLM.from_pretrained(..., trust_remote_code=True)"
        )
    else:
        save_pretrained(model, out, special_tokens(state))
    has_tokenizer = save_tokenizer(state, out, config.block_size)
    options = architecture_options(config)
    write_card(
        out,
        run_dir,
        state,
        checkpoint,
        model,
        has_tokenizer,
        f"GPT-2 with {config.attention} attention"
        + (f" ({', '.join(options)})" if options else ""),
        remote,
    )


def architecture_options(config: Any) -> list[str]:
    """The architecture options away from GPT-2's, in words (the card, the log)."""
    words = {
        "RoPE": config.position == "rope",
        "RMSNorm": config.norm == "rmsnorm",
        "SwiGLU": config.mlp == "swiglu",
        "QK-norm": config.qk_norm,
        f"{config.kv_heads} KV heads": config.kv_heads != config.n_head,
        "untied head": not config.tie_head,
        f"norm eps {config.norm_eps:g}": config.norm_eps != 1e-5,
        "no biases": not config.bias,
    }
    return [word for word, on in words.items() if on]
