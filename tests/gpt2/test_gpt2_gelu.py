"""The GELU MLP's two forms (GPT2_GELU): tanh, OpenAI's GPT-2 and the default;
exact, nanoGPT's and knlp's. Each computes torch's GELU of that form; the
Hugging Face path stays on tanh; an exact model exports as GPT2LMHeadModel
with activation_function "gelu"."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from gpt2.config import GPT2Config
from gpt2.hf import load_pretrained, save_pretrained
from gpt2.model import GPT2

TINY = dict(vocab_size=50, block_size=16, n_layer=2, n_head=2, n_embd=32)
TORCH_FORM = {"tanh": "tanh", "exact": "none"}


def model(gelu: str, seed: int = 0) -> GPT2:
    torch.manual_seed(seed)
    return GPT2(GPT2Config(**TINY, gelu=gelu)).eval()


@pytest.mark.parametrize("gelu", ["tanh", "exact"])
def test_each_form_is_torch_s_gelu_of_that_form(gelu):
    mlp = model(gelu).transformer.h[0].mlp
    x = torch.linspace(-6, 6, 4001).reshape(1, -1, 1).expand(1, -1, 32).contiguous()
    hidden = mlp.c_fc(x)
    assert torch.equal(mlp.gelu(hidden), F.gelu(hidden, approximate=TORCH_FORM[gelu]))
    with torch.no_grad():
        expected = mlp.c_proj(F.gelu(hidden, approximate=TORCH_FORM[gelu]))
        assert torch.equal(mlp(x), expected)


def test_the_forms_differ_as_measured_and_the_default_is_tanh():
    assert GPT2Config(**TINY).gelu == "tanh"
    x = torch.linspace(-8, 8, 160001, dtype=torch.float64)
    gap = (F.gelu(x, approximate="tanh") - F.gelu(x)).abs()
    assert gap.max().item() == pytest.approx(4.73e-4, rel=1e-3)  # the Kconfig help's figure
    tanh, exact = model("tanh"), model("exact")
    exact.load_state_dict(tanh.state_dict())
    idx = torch.randint(0, 50, (2, 16), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        diff = (tanh(idx, idx)[0] - exact(idx, idx)[0]).abs().max().item()
    assert 1e-7 < diff < 1e-3  # the same weights: close, not equal


def test_an_unknown_form_is_refused():
    with pytest.raises(ValueError, match="gelu='erf' is invalid: it must be one of tanh, exact"):
        GPT2Config(**TINY, gelu="erf")


@pytest.mark.parametrize("gelu, activation", [("tanh", "gelu_new"), ("exact", "gelu")])
def test_hf_folders_round_trip_with_their_form(tmp_path, gelu, activation):
    ours = model(gelu, seed=3)
    save_pretrained(ours, tmp_path)
    from transformers import GPT2LMHeadModel  # seconds to import: only here

    hf = GPT2LMHeadModel.from_pretrained(tmp_path).eval()
    assert hf.config.activation_function == activation
    loaded, _ = load_pretrained(tmp_path)  # GPT2_INIT_FROM=hf's reader
    assert loaded.config.gelu == gelu
    idx = torch.randint(0, 50, (2, 16), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        assert (hf(idx).logits - ours(idx, idx)[0]).abs().max().item() < 1e-5
        assert torch.equal(loaded(idx, idx)[0], ours(idx, idx)[0])
