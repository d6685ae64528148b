"""A Hugging Face causal LM folder as an evaluation baseline (`make eval-baseline`).

Any architecture transformers' AutoModelForCausalLM knows (GPT-2, GPT-NeoX as
Pythia, Llama as TinyLlama and SmolLM, ...) is read from a local folder in the
save_pretrained layout, with the tokenizer saved beside it. Only safetensors
weights are read: a pytorch_model.bin is a pickle, which can run code as it is
loaded, so a folder holding only that is refused. Code shipped with a model
(auto_map in config.json) runs only with CONFIG_EVAL_TRUST_REMOTE_CODE.

The model and its tokenizer are wrapped in the project's interfaces, so the
evaluation that scores our runs (lib/eval/suite.py, perplexity.py) scores it
unchanged. The text of a set is tokenized by the baseline's own tokenizer
without special tokens, after one start token (the tokenizer's BOS, else its
EOS) that is context only, never scored: every token of the text is scored,
as for our runs (whose GPT-2 BPE starts from end-of-text) and as lm-eval's
rolling log-likelihood does, so bits per byte covers every byte of the text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from lib.data.tokenizers import Tokenizer
from lib.run.checkpoint import CheckpointError

WEIGHTS = ("model.safetensors", "model.safetensors.index.json")
PICKLES = ("pytorch_model.bin", "pytorch_model.bin.index.json", "tf_model.h5", "flax_model.msgpack")
CONTEXT_KEYS = ("max_position_embeddings", "n_positions", "n_ctx", "seq_length")


def read_folder(folder: Path, trust_remote_code: bool) -> dict[str, Any]:
    """config.json of a baseline folder once its weights and code may be loaded;
    CheckpointError saying what is wrong and what to do otherwise."""
    folder = Path(folder).expanduser()
    if not (folder / "config.json").is_file():
        found = sorted(p.name for p in folder.iterdir())[:12] if folder.is_dir() else []
        raise CheckpointError(
            f"{folder} is not a Hugging Face model folder: it has no config.json "
            f"(found: {', '.join(found) or 'nothing'}). Point BASELINE_MODEL at the "
            f"folder `huggingface-cli download <repo id> --local-dir <folder>` made"
        )
    if not any((folder / w).is_file() for w in WEIGHTS):
        pickled = [p for p in PICKLES if (folder / p).is_file()]
        what = f"only {', '.join(pickled)}" if pickled else "no model.safetensors"
        raise CheckpointError(
            f"{folder} holds {what}: baselines are read from safetensors only, since "
            f"a pickled checkpoint can run code as it is loaded. Download the "
            f"repository's model.safetensors (most hub models have one), or convert "
            f"a checkpoint you trust with transformers' save_pretrained"
        )
    config = json.loads((folder / "config.json").read_text())
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    kind = config.get("model_type")
    if kind not in CONFIG_MAPPING and not trust_remote_code:
        custom = "auto_map" in config
        raise CheckpointError(
            f"{folder}: model type {kind!r} is not one transformers knows"
            + (
                "; the folder ships its own model code (auto_map in config.json), "
                "which runs only with CONFIG_EVAL_TRUST_REMOTE_CODE=y: read that code "
                "first, it runs with your permissions"
                if custom
                else " and the folder ships no code for it; a newer transformers may know it"
            )
        )
    return config


def context_length(config: dict[str, Any]) -> int:
    """The model's context in tokens, from its config.json."""
    for key in CONTEXT_KEYS:
        if isinstance(config.get(key), int) and config[key] > 0:
            return int(config[key])
    raise CheckpointError(
        f"config.json names no context length (looked for {', '.join(CONTEXT_KEYS)})"
    )


class CausalLM(nn.Module):
    """A transformers causal LM behind the project's forward(idx, targets) ->
    (logits, loss) contract (lib/model/interface.py), for perplexity.py,
    lambada.py and harness.py; loss is not computed (the callers score logits)."""

    def __init__(self, model: nn.Module, block_size: int) -> None:
        super().__init__()
        self.model = model
        self.block_size = block_size

    def forward(self, idx: Tensor, targets: Tensor | None = None) -> tuple[Tensor, None]:
        return self.model(input_ids=idx, use_cache=False).logits, None


class HFTokenizer(Tokenizer):
    """A transformers tokenizer behind the project's Tokenizer interface.
    eot_token is the start token prepended to a text (module docstring)."""

    name = "hf"

    def __init__(self, tokenizer: Any, vocab_size: int) -> None:
        self.tokenizer = tokenizer
        self.vocab_size = vocab_size  # the model's embedding rows: ids past it are errors
        bos, eos = tokenizer.bos_token_id, tokenizer.eos_token_id
        self.eot_token = bos if bos is not None else eos

    @classmethod
    def from_meta(cls, meta: dict[str, Any]) -> Tokenizer:
        raise NotImplementedError("a baseline's tokenizer is read from its folder")

    def encode(self, text: str) -> list[int]:
        # verbose=False: the text is longer than the context on purpose (windows cut it)
        return list(self.tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"])

    def decode(self, ids: Sequence[int]) -> str:
        return str(self.tokenizer.decode(list(ids)))

    def to_meta(self) -> dict[str, Any]:
        return {"kind": "hf", "name": self.tokenizer.name_or_path}


def load_baseline(
    folder: Path, trust_remote_code: bool = False
) -> tuple[CausalLM, HFTokenizer, dict[str, Any]]:
    """The folder's model (fp32, eval mode, on the CPU), its tokenizer, and
    what eval.json records of the model."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = Path(folder).expanduser().resolve()
    config = read_folder(folder, trust_remote_code)
    block = context_length(config)
    why = "its vocabulary is empty"
    try:
        tokenizer = AutoTokenizer.from_pretrained(
            folder, local_files_only=True, trust_remote_code=trust_remote_code
        )
    except (OSError, ValueError, TypeError) as err:
        tokenizer, why = (
            None,
            f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}",
        )
    # transformers builds an empty tokenizer of the model's type when the files are missing
    if tokenizer is None or len(tokenizer) < 2:
        raise CheckpointError(
            f"{folder}: no tokenizer could be read from the folder ({why}). A baseline "
            f"is scored with its own tokenizer: download the repository's tokenizer "
            f"files too (tokenizer.json, tokenizer_config.json, ...)"
        )
    model = AutoModelForCausalLM.from_pretrained(
        folder,
        local_files_only=True,
        use_safetensors=True,
        trust_remote_code=trust_remote_code,
        dtype=torch.float32,  # autocast gives bf16 where configured, as for our runs
    ).eval()
    wrapped = CausalLM(model, block)
    info = {
        "family": str(config.get("model_type", "unknown")),
        "source": "pretrained",
        "path": str(folder),
        "checkpoint": next(w for w in WEIGHTS if (folder / w).is_file()),
        "step": None,
        "tokens_seen": None,
        "params": sum(p.numel() for p in model.parameters()),
        "block_size": block,
        "architecture": (config.get("architectures") or [type(model).__name__])[0],
        "tokenizer": type(tokenizer).__name__,
        "vocab_size": int(model.config.vocab_size),
        "start_token": None,
        "trust_remote_code": trust_remote_code,
    }
    hf_tok = HFTokenizer(tokenizer, int(model.config.vocab_size))
    if hf_tok.eot_token is not None:
        info["start_token"] = tokenizer.convert_ids_to_tokens(hf_tok.eot_token)
    return wrapped, hf_tok, info


def baseline_dir(folder: Path, cfg: Any) -> Path:
    """<results>/baseline-<folder name>/, made if needed: where a baseline's
    eval.json goes (`make results` reads it beside the runs)."""
    from lib.run.rundir import results_root

    name = re.sub(r"[^A-Za-z0-9._-]", "_", Path(folder).expanduser().resolve().name)
    out = results_root(cfg.run) / f"baseline-{name}"
    out.mkdir(parents=True, exist_ok=True)
    return out
