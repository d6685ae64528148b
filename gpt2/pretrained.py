"""Starting a run from a Hugging Face GPT-2 folder (GPT2_INIT_FROM=hf,
GPT2_INIT_PATH), as nanoGPT's init_from="gpt2" and litgpt's finetuning do.

The run's configuration stays the one description of its model: the folder's
config.json must match it (a mismatch is refused naming the symbols to set;
GPT-2's four sizes are the presets), except that a shorter GPT2_BLOCK_SIZE
keeps the first rows of the position table (nanoGPT's crop_block_size) and
GPT2_PAD_VOCAB's extra rows are filled in (pad_rows). from_run_config checks
the folder as soon as the path is set (without torch, so config checks stay
fast) and returns a PretrainedGPT2Config; the family's build() loads the
weights into the model it builds (gpt2/hf.py's load_weights: this module
imports neither torch nor hf.py), so training, `make bench` and `make estimate`
get the same model. A run resumed from its checkpoint builds the same way and
then loads the checkpoint over these weights (lib/train/trainer.py _restore).
"""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from gpt2.config import GPT2Config
from gpt2.presets import PRESETS
from lib.paths import from_root

GELU_TANH = ("gelu_new", "gelu_pytorch_tanh")
# config.json's activation_function -> GPT2Config.gelu (OpenAI's GPT-2: gelu_new)
GELU_FORMS = {**{name: "tanh" for name in GELU_TANH}, "gelu": "exact"}
HOW_TO_GET = (
    "nothing is downloaded: fetch GPT-2 124M once with `huggingface-cli download "
    "openai-community/gpt2 config.json model.safetensors --local-dir data/hf/gpt2` "
    "(gpt2-medium, -large, -xl likewise) and set "
    'CONFIG_GPT2_INIT_PATH="data/hf/gpt2"'
)


class PretrainedError(ValueError):
    """A GPT2_INIT_PATH folder that cannot start this run; the message says why and
    what to change. A ValueError, so configuration checks report it."""


class PretrainedGPT2Config(GPT2Config):
    """A GPT2Config whose model starts from the Hugging Face folder init_path.

    Deliberately not a dataclass of its own: fields(), asdict() and so a
    checkpoint's model_config are exactly GPT2Config's (a checkpoint holds its
    own weights and must never send a reader back to the folder)."""

    init_path: str

    @property
    def init_record(self) -> dict[str, Any]:
        """What metrics.json records as "init": the folder, its weights file,
        that file's size and SHA-256 (the Hub lists the same hash for its
        files) and config.json's SHA-256."""
        return {"from": "hf", **_folder_record(resolve(self.init_path))}


def resolve(path: str) -> Path:
    """GPT2_INIT_PATH as a folder: ~ expanded, relative to the repository root."""
    return from_root(Path(path).expanduser())


def read_config(model_dir: Path) -> dict[str, Any]:
    """config.json of a GPT-2 folder, refusing variants our model cannot reproduce."""
    path = Path(model_dir) / "config.json"
    if not path.is_file():
        raise PretrainedError(
            f"{path} is missing: not a Hugging Face model folder "
            f"(save_pretrained writes config.json beside the weights)"
        )
    hf = json.loads(path.read_text())
    if hf.get("model_type") != "gpt2":
        raise PretrainedError(
            f"{path}: model_type {hf.get('model_type')!r}; only GPT-2 "
            f'(model_type "gpt2") maps onto this model'
        )
    n_embd = hf.get("n_embd", 768)
    unsupported = {
        "activation_function": hf.get("activation_function", "gelu_new") not in GELU_FORMS,
        "n_inner": hf.get("n_inner") not in (None, 4 * n_embd),
        "layer_norm_epsilon": hf.get("layer_norm_epsilon", 1e-5) != 1e-5,
        "scale_attn_weights": not hf.get("scale_attn_weights", True),
        "scale_attn_by_inverse_layer_idx": hf.get("scale_attn_by_inverse_layer_idx", False),
        "add_cross_attention": hf.get("add_cross_attention", False),
        "tie_word_embeddings": not hf.get("tie_word_embeddings", True),
    }
    bad = [f"{k}={hf.get(k)!r}" for k, v in unsupported.items() if v]
    if bad:
        raise PretrainedError(
            f"{path}: {', '.join(bad)} is not plain GPT-2 (GELU, tanh or "
            f"exact, MLP 4x wide, LayerNorm eps 1e-5, tied head), which this "
            f"model is"
        )
    return hf


def hf_gelu(hf: dict[str, Any]) -> str:
    """The GELU form a (read_config-checked) config.json's MLP uses."""
    return GELU_FORMS[hf.get("activation_function", "gelu_new")]


def hf_shape(hf: dict[str, Any]) -> dict[str, int]:
    """The shape a config.json describes, with transformers' GPT-2 defaults."""
    return {
        "vocab_size": hf.get("vocab_size", 50257),
        "n_positions": hf.get("n_positions", 1024),
        "n_layer": hf.get("n_layer", 12),
        "n_head": hf.get("n_head", 12),
        "n_embd": hf.get("n_embd", 768),
    }


def _size_symbols(shape: dict[str, int]) -> str:
    for name, size in PRESETS.items():
        if (size.n_layer, size.n_head, size.n_embd) == (
            shape["n_layer"],
            shape["n_head"],
            shape["n_embd"],
        ):
            return f"CONFIG_GPT2_MODEL_{name.upper()}=y"
    return (
        f"CONFIG_GPT2_MODEL_CUSTOM=y with CONFIG_GPT2_N_LAYER={shape['n_layer']}, "
        f"CONFIG_GPT2_N_HEAD={shape['n_head']}, CONFIG_GPT2_N_EMBD={shape['n_embd']}"
    )


def shape_problems(config: GPT2Config, hf: dict[str, Any], vocab_size: int | None) -> list[str]:
    """What keeps the folder's weights out of a model of `config`, each naming
    the symbols to change; vocab_size is the tokenizer's (before padding), None
    when it was checked already."""
    shape, problems = hf_shape(hf), []
    if (config.n_layer, config.n_head, config.n_embd) != (
        shape["n_layer"],
        shape["n_head"],
        shape["n_embd"],
    ):
        problems.append(
            f"the checkpoint has {shape['n_layer']} layers, {shape['n_head']} heads, "
            f"{shape['n_embd']} wide, the run {config.n_layer}, {config.n_head}, "
            f"{config.n_embd}: set {_size_symbols(shape)}"
        )
    if config.block_size > shape["n_positions"]:
        problems.append(
            f"CONFIG_GPT2_BLOCK_SIZE={config.block_size} exceeds the checkpoint's "
            f"{shape['n_positions']} positions: set it to at most "
            f"{shape['n_positions']} (shorter keeps the first rows)"
        )
    if vocab_size is not None and vocab_size != shape["vocab_size"]:
        problems.append(
            f"the data's tokenizer has {vocab_size} tokens, the checkpoint "
            f"{shape['vocab_size']}: a fine-tune reads its data with GPT-2's tokenizer, so "
            f"the checkpoint must have been trained with it (a run of this project "
            f"exported for fine-tuning: trained with CONFIG_DATA_TOKENIZER_GPT2=y)"
        )
    if not config.bias:
        problems.append("GPT-2 has biases: set CONFIG_GPT2_BIAS=y")
    gelu = hf_gelu(hf)
    if config.gelu != gelu and config.mlp == "gelu":
        problems.append(
            f"the checkpoint's MLP uses the {gelu} GELU (activation_function "
            f"{hf.get('activation_function', 'gelu_new')!r}), the run the "
            f"{config.gelu} one: set CONFIG_GPT2_GELU_{gelu.upper()}=y"
        )
    if not config.gpt2_layout:
        problems.append(
            f"GPT-2's weights fit only GPT-2's block: vanilla attention, learned "
            f"positions, LayerNorm with eps 1e-5, GELU MLP, one KV head per head, "
            f"no QK-norm, tied head (this run: attention={config.attention}, "
            f"position={config.position}, norm={config.norm}, "
            f"norm_eps={config.norm_eps}, mlp={config.mlp}, "
            f"n_kv_head={config.n_kv_head}, qk_norm={config.qk_norm}, "
            f"tie_head={config.tie_head})"
        )
    return problems


def pretrained_config(config: GPT2Config, path: str, vocab_size: int) -> PretrainedGPT2Config:
    """config as a PretrainedGPT2Config starting from `path`, checked against the
    folder's config.json when the path is set (an empty one is reported when
    the model is built: a defconfig leaves it for the user to fill in)."""
    out = PretrainedGPT2Config(**asdict(config))
    out.init_path = path
    if path:
        check(out, vocab_size)
    return out


def check(config: PretrainedGPT2Config, vocab_size: int | None) -> dict[str, Any]:
    """The folder's config.json, after refusing an empty path, a missing folder
    and every mismatch at once (one PretrainedError)."""
    if not config.init_path:
        raise PretrainedError(
            f"CONFIG_GPT2_INIT_PATH is empty; GPT2_INIT_FROM=hf starts from "
            f"a local Hugging Face GPT-2 folder and {HOW_TO_GET}"
        )
    folder = resolve(config.init_path)
    if not folder.is_dir():
        raise PretrainedError(
            f"CONFIG_GPT2_INIT_PATH={config.init_path!r}: no folder {folder}; {HOW_TO_GET}"
        )
    hf = read_config(folder)
    problems = shape_problems(config, hf, vocab_size)
    if problems:
        raise PretrainedError(
            f"CONFIG_GPT2_INIT_PATH={config.init_path!r} cannot start this "
            f"run: " + "; ".join(problems) + "."
        )
    return hf


def pad_rows(wte: Any, rows: int) -> Any:
    """The token embedding with rows appended up to `rows`, each the mean of the
    real rows. The head is tied, so a pad token's logit is h . mean(w), the
    mean of the real logits; by Jensen's inequality exp of a mean is at most
    the mean of the exps, so the n pad tokens add at most n / V of the softmax
    denominator over V real tokens: the loss rises by at most log(1 + n / V)
    (0.00094 nats for 47 rows over 50257), where zero rows (logit 0, far above
    GPT-2's typical logits) could dominate it. Pad tokens never occur in the
    data, so their rows only ever act through this denominator."""
    import torch

    extra = rows - wte.shape[0]
    if extra <= 0:
        return wte
    return torch.cat([wte, wte.mean(dim=0, keepdim=True).expand(extra, -1)]).contiguous()


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 24), b""):
            h.update(chunk)
    return h.hexdigest()


def weight_files(folder: Path) -> list[Path]:
    """The files read_weights reads, in the order it prefers them."""
    if (folder / "model.safetensors").is_file():
        return [folder / "model.safetensors"]
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        shards = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        return [index, *(folder / s for s in shards)]
    return [folder / "pytorch_model.bin"] if (folder / "pytorch_model.bin").is_file() else []


def _folder_record(folder: Path) -> dict[str, Any]:
    files = weight_files(folder)
    stamp = tuple((str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in files if p.is_file())
    return _hashed_record(folder, stamp)


@functools.lru_cache(maxsize=8)
def _hashed_record(folder: Path, stamp: tuple[tuple[str, int, int], ...]) -> dict[str, Any]:
    """stamp: the weight files with sizes and times, so a changed file is hashed again."""
    config = folder / "config.json"
    return {
        "path": str(folder),
        "config_sha256": _sha256(config) if config.is_file() else None,
        "weights": [
            {"file": Path(name).name, "bytes": size, "sha256": _sha256(Path(name))}
            for name, size, _ in stamp
        ],
    }
