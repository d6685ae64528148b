"""Hugging Face GPT-2 folders: logit parity with transformers, errors, export round trip."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import torch

# transformers.utils.logging (about a second) stays at import, so the verbosity is
# set at collection as before; its GPT-2 model (torchao, scipy, ...) takes seconds
# more, so it is imported where a test uses it.
from transformers.utils import logging as hf_logging

from gpt2.config import GPT2Config
from gpt2.hf import load_pretrained, save_pretrained
from gpt2.model import GPT2
from lib.run.checkpoint import CheckpointError

if TYPE_CHECKING:
    from transformers import GPT2LMHeadModel

hf_logging.set_verbosity_error()


def hf_model(init: float = 0.02, **shape) -> GPT2LMHeadModel:
    from transformers import GPT2Config as HFConfig
    from transformers import GPT2LMHeadModel

    torch.manual_seed(0)
    shape = {
        "vocab_size": 101,
        "n_positions": 32,
        "n_embd": 64,
        "n_layer": 2,
        "n_head": 4,
        "bos_token_id": 0,
        "eos_token_id": 0,
        **shape,
    }
    return GPT2LMHeadModel(HFConfig(initializer_range=init, **shape)).eval()


@pytest.fixture
def saved(tmp_path) -> tuple[GPT2LMHeadModel, Path]:
    model = hf_model(init=0.1)
    model.save_pretrained(tmp_path / "hf")
    return model, tmp_path / "hf"


def max_diff(hf: GPT2LMHeadModel, ours: GPT2, x: torch.Tensor) -> float:
    with torch.no_grad():
        return (hf(x).logits - ours(x, x)[0]).abs().max().item()


def test_logits_match_transformers(saved):
    hf, path = saved
    ours, info = load_pretrained(path)
    x = torch.randint(0, 101, (3, 32), generator=torch.Generator().manual_seed(1))
    assert info["weights"] == "model.safetensors" and not ours.training
    assert max_diff(hf, ours, x) < 1e-5
    # In float64 the two computations agree to rounding: the mapping is exact.
    assert max_diff(hf.double(), ours.double(), x) < 1e-10


def test_original_pytorch_model_bin_layout_loads(saved, tmp_path):
    """The first GPT-2 uploads: no "transformer." prefix, causal-mask buffers kept."""
    hf, _ = saved
    old = tmp_path / "old"
    old.mkdir()
    (old / "config.json").write_text((saved[1] / "config.json").read_text())
    state = {k.removeprefix("transformer."): v for k, v in hf.state_dict().items()}
    state["h.0.attn.bias"] = torch.tril(torch.ones(1, 1, 32, 32))
    state["h.0.attn.masked_bias"] = torch.tensor(-1e4)
    torch.save(state, old / "pytorch_model.bin")
    ours, info = load_pretrained(old)
    assert info["weights"] == "pytorch_model.bin"
    assert max_diff(hf, ours, torch.arange(32).unsqueeze(0)) < 1e-5


def rewrite(path: Path, change) -> None:
    from safetensors.torch import load_file, save_file

    tensors = load_file(path / "model.safetensors")
    change(tensors)
    save_file(tensors, str(path / "model.safetensors"))


def test_missing_and_unexpected_tensors_are_named(saved):
    _, path = saved
    rewrite(
        path,
        lambda t: (
            t.pop("transformer.h.1.mlp.c_fc.weight"),
            t.update({"transformer.h.2.ln_1.weight": torch.ones(64)}),
        ),
    )
    with pytest.raises(CheckpointError) as err:
        load_pretrained(path)
    message = str(err.value)
    assert "missing tensors: transformer.h.1.mlp.c_fc.weight" in message
    assert "unexpected tensors: transformer.h.2.ln_1.weight" in message


def test_misshapen_and_untied_tensors_are_named(saved):
    _, path = saved
    rewrite(
        path,
        lambda t: t.update(
            {
                "transformer.h.0.attn.c_proj.weight": torch.ones(64, 32),
                "lm_head.weight": torch.ones(101, 64),
            }
        ),
    )
    with pytest.raises(CheckpointError) as err:
        load_pretrained(path)
    assert "transformer.h.0.attn.c_proj.weight has shape (64, 32), expected (64, 64)" in str(
        err.value
    )
    assert "lm_head.weight differs from transformer.wte.weight" in str(err.value)


def test_missing_files_and_other_architectures_are_clear_errors(saved, tmp_path):
    _, path = saved
    (path / "model.safetensors").unlink()
    with pytest.raises(CheckpointError, match="holds no model.safetensors.*found: config.json"):
        load_pretrained(path)
    with pytest.raises(CheckpointError, match="config.json is missing"):
        load_pretrained(tmp_path)
    hf_model(activation_function="relu").save_pretrained(tmp_path / "relu")
    with pytest.raises(CheckpointError, match="activation_function='relu'"):
        load_pretrained(tmp_path / "relu")


@pytest.mark.parametrize("bias", [True, False])
def test_export_loads_in_transformers_with_the_same_logits(tmp_path, bias):
    torch.manual_seed(3)
    ours = GPT2(
        GPT2Config(vocab_size=97, block_size=16, n_layer=2, n_head=2, n_embd=32, bias=bias)
    ).eval()
    for p in ours.parameters():
        p.data.normal_(0, 0.2)
    save_pretrained(ours, tmp_path / "out")
    from transformers import GPT2LMHeadModel

    hf = GPT2LMHeadModel.from_pretrained(tmp_path / "out").eval()
    x = torch.randint(0, 97, (2, 16), generator=torch.Generator().manual_seed(4))
    assert max_diff(hf, ours, x) < 1e-5
    back, _ = load_pretrained(tmp_path / "out")  # and back into our model
    assert max_diff(hf, back, x) < 1e-5


def test_export_refuses_attention_variants(tmp_path):
    mla = GPT2(
        GPT2Config(
            vocab_size=97,
            block_size=16,
            n_layer=1,
            n_head=2,
            n_embd=32,
            attention="mla",
            latent_dim=16,
        )
    )
    with pytest.raises(ValueError, match="no Hugging Face GPT-2 layout"):
        save_pretrained(mla, tmp_path / "out")
