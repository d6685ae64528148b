"""GPT-2 model family: config from Kconfig, model builder, run-id variant, and
the rest of its registry record (lib/model/registry.py)."""

from __future__ import annotations

from dataclasses import fields
from functools import partial
from typing import TYPE_CHECKING, Any

from gpt2.activations import activations
from gpt2.config import GPT2Config
from gpt2.pretrained import PretrainedGPT2Config, pretrained_config
from gpt2.variants import VARIANTS
from gpt2.variants import variant as attention_variant
from lib.config.run_config import value_or
from lib.model.registry import ModelFamily, config_from_symbols

if TYPE_CHECKING:
    from lib.config.run_config import RunConfig

# GPT2Config field -> Kconfig symbol. Fields map mechanically to GPT2_<FIELD>;
# the attention options keep the names researchers' configs already use.
SYMBOLS = {
    f.name: "GPT2_" + f.name.upper() for f in fields(GPT2Config) if f.name != "vocab_size"
} | {
    "latent_dim": "RA_MLA_LATENT_DIM",
    "rope_dim": "RA_MLA_ROPE_DIM",
    "q_latent": "RA_MLA_PER_HEAD_Q_LATENT",
    "v_up_per_head": "RA_MLA_PER_HEAD_V_UP",
    "ra_alpha": "RA_MLA_RA_ALPHA",
    "ra_window": "RA_MLA_RA_WINDOW",
    "ra_alpha_learned": "RA_MLA_RA_ALPHA_LEARNED",
}


def from_run_config(run: RunConfig, vocab_size: int) -> GPT2Config:
    """Kconfig symbols -> GPT2Config; a size other than "custom" (the GPT2_MODEL
    choice) takes its shape from the preset."""
    tokens = vocab_size
    if run.GPT2_PAD_VOCAB:
        vocab_size = -(-vocab_size // 64) * 64
    size = run.GPT2_MODEL
    assert size is not None  # visible whenever MODEL_GPT2, the only runs this family builds
    make = GPT2Config if size == "custom" else partial(GPT2Config.from_preset, size)
    config = config_from_symbols(make, SYMBOLS, run, vocab_size=vocab_size)
    if run.GPT2_INIT_FROM == "hf":  # gpt2/pretrained.py: checks the folder, no torch
        return pretrained_config(config, value_or(run.GPT2_INIT_PATH, ""), tokens)
    return config


def build(config: GPT2Config):
    from gpt2.hf import load_weights
    from gpt2.model import GPT2  # torch import deferred: config checks stay fast

    model = GPT2(config)
    # On the meta device (estimates, resolved settings) there is nothing to load into.
    if isinstance(config, PretrainedGPT2Config) and not next(model.parameters()).is_meta:
        load_weights(model, config)
    return model


def export(*args: Any) -> None:
    from gpt2.export import export as hf_export  # torch import deferred

    hf_export(*args)


def variant(run: RunConfig) -> str:
    # hidden only for HAMT runs and by GPT2_ATTENTION_MULTIPLE, a matrix the runs expand
    assert run.GPT2_ATTENTION is not None, "GPT2_ATTENTION_MULTIPLE is a matrix, not a run"
    if (
        run.GPT2_INIT_FROM == "hf"
    ):  # vanilla GPT-2 from pretrained weights: never mixed with scratch
        return "hf"
    return attention_variant(run.GPT2_ATTENTION).tag


def matrix_variants(run: RunConfig) -> list[list[tuple[str, str]]]:
    """One override list per attention variant the matrix enables."""
    if not run.GPT2_ATTENTION_MULTIPLE:
        return [[]]
    return [
        [("GPT2_ATTENTION_MULTIPLE", "n"), ("GPT2_ATTENTION", v.name)]
        for v in VARIANTS
        if run.values.get(v.matrix_symbol)
    ]


def bench_models(
    run: RunConfig, vocab: int, max_len: int, shape: dict[str, int]
) -> dict[str, GPT2Config]:
    """The config of every attention variant the benchmarks compare
    (gpt2/variants.py) at the given width and depth, with room for max_len; the
    variants' own options as configured where set, else small defaults."""
    latent = value_or(run.RA_MLA_LATENT_DIM, max(16, shape["n_embd"] // 4))
    alpha = run.RA_MLA_RA_ALPHA or 0.5  # RA's cost is the same for any alpha > 0
    layers, heads = shape["n_layer"], shape["n_head"]
    gated_layers = min(value_or(run.GPT2_RA_GATED_LAYERS, 3), layers)
    gated_heads = min(value_or(run.GPT2_RA_GATED_HEADS, 1), heads)
    return {
        v.name: GPT2Config(
            vocab_size=vocab,
            block_size=max_len,
            n_layer=layers,
            n_head=heads,
            n_embd=shape["n_embd"],
            attention=v.name,
            latent_dim=latent,
            ra_alpha=alpha if v.reciprocal else 0.0,
            ra_gated_layers=gated_layers,
            ra_gated_heads=gated_heads,
        )
        for v in VARIANTS
        if v.bench
    }


FAMILY = ModelFamily(
    name="gpt2",
    label="GPT-2",
    config_cls=GPT2Config,
    from_run_config=from_run_config,
    build=build,
    variant=variant,
    activations=activations,
    matrix_variants=matrix_variants,
    bench_models=bench_models,
    export=export,
)
