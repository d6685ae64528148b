"""knlp's MLA family (gpt2/kvsplice.py): the settings' checks, from
GPT2Config and from Kconfig, and pruning of its layers (the forward pass
itself is tests/gpt2/test_gpt2_kvsplice.py's)."""

from __future__ import annotations

import pytest
import torch

from gpt2.config import GPT2Config
from gpt2.model import GPT2
from lib.config.kconfig import ConfigError
from lib.config.run_config import run_config_from_defaults
from tests.gpt2.test_gpt2_kvsplice import SMALL, tokens

# ------------------------------------------------------------- config


@pytest.mark.parametrize("ratio", [0, 1.5, "abc", -0.5])
def test_bad_ratio_is_refused(ratio):
    with pytest.raises(ValueError, match=r"kvsplice_ratio=.* must be a number above 0"):
        GPT2Config(**{**SMALL, "attention": "knlp_mla_kv", "kvsplice_ratio": ratio})


def test_odd_or_tiny_compressed_width_is_refused():
    with pytest.raises(ValueError, match="must be even and at least 2"):
        GPT2Config(**{**SMALL, "attention": "knlp_mla_kv", "knlp_mla_latent": 18})  # 9
    # the MLA variant has no compressed width: the same numbers are fine there
    GPT2Config(**{**SMALL, "attention": "knlp_mla", "knlp_mla_latent": 18})


def test_more_kvsplice_layers_than_layers_is_refused():
    with pytest.raises(ValueError, match="kvsplice_layers=4 is invalid: .* from 1 to 3"):
        GPT2Config(**{**SMALL, "attention": "knlp_mla_kv_fim", "kvsplice_layers": 4})
    GPT2Config(**{**SMALL, "attention": "knlp_mla_kv", "kvsplice_layers": 4})  # unused there


def test_grouped_query_attention_is_refused():
    with pytest.raises(ValueError, match="grouped-query attention or QK-norm"):
        GPT2Config(**{**SMALL, "attention": "knlp_mla", "n_kv_head": 1})


@pytest.mark.parametrize(
    "values, message",
    [
        ({"GPT2_KVSPLICE_RATIO": "abc"}, "not a number"),
        ({"GPT2_KVSPLICE_RATIO": "0"}, "out of range"),
        ({"GPT2_KVSPLICE_RATIO": "1.5"}, "out of range"),
    ],
)
def test_kconfig_refuses_bad_ratios(values, message):
    with pytest.raises(ConfigError, match=message):
        run_config_from_defaults({"GPT2_ATTENTION_KNLP_MLA_KV": "y", **values})


def test_kconfig_settings_reach_the_model_config():
    import gpt2

    run = run_config_from_defaults(
        {
            "GPT2_ATTENTION_KNLP_MLA_KV_FIM": "y",
            "GPT2_N_LAYER": "6",
            "GPT2_KNLP_MLA_LATENT": "64",
            "GPT2_KVSPLICE_RATIO": "0.25",
            "GPT2_KVSPLICE_LAYERS": "2",
        }
    )
    cfg = gpt2.from_run_config(run, 100)
    assert (cfg.attention, cfg.knlp_mla_latent, cfg.kvsplice_ratio, cfg.kvsplice_layers) == (
        "knlp_mla_kv_fim",
        64,
        0.25,
        2,
    )
    assert gpt2.variant(run) == "knlpmlakvfim"
    too_deep = {"GPT2_ATTENTION_KNLP_MLA_KV_FIM": "y", "GPT2_N_LAYER": "2"}
    with pytest.raises(ConfigError, match="CONFIG_GPT2_KVSPLICE_LAYERS=4 is invalid"):
        run_config_from_defaults(too_deep)


# ------------------------------------------------------------- pruning


@pytest.mark.parametrize("method", ["magnitude", "movement", "state"])
def test_pruning_thins_every_linear_of_the_family(method):
    """Magnitude, movement and AdamWPrune prune these layers' Linears too;
    the tied map (to_kv_latent.weight reused transposed) reads the pruned
    weight, so the zeros hold in both of its uses."""
    from lib.prune.pruner import Pruner

    torch.manual_seed(0)
    m = GPT2(GPT2Config(**{**SMALL, "attention": "knlp_mla_kv_fim", "n_embd": 32}))
    names = [n for n, _ in m.prunable()]
    assert "transformer.h.0.attn.from_kv_latent.weight" in names
    assert "transformer.h.2.attn.kvsplice.compress.weight" in names
    assert "transformer.h.2.attn.out_residual.weight" in names
    opt = torch.optim.AdamW(m.parameters(), lr=3e-3)
    pruner = Pruner(
        m.prunable(),
        method=method,
        target=0.5,
        warmup=2,
        ramp_end=8,
        frequency=2,
        schedule="linear",
        scope="global",
        optimizer=opt,
    )
    x = tokens(7, batch=4, seq=17)
    for step in range(1, 11):
        _, loss = m(x[:, :-1], x[:, 1:])
        assert loss is not None and torch.isfinite(loss)
        opt.zero_grad()
        loss.backward()
        pruner.before_step(step)
        opt.step()
        pruner.after_step(step)
    assert pruner.report()["sparsity"] == pytest.approx(0.5, abs=0.01)
    tied = m.transformer.h[2].attn.to_kv_latent.weight
    assert 0.05 < float((tied == 0).float().mean()) < 0.95
