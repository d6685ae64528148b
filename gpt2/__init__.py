"""GPT-2 model family: config from Kconfig, model builder, run-id variant, and
the rest of its registry record (lib/registry.py)."""
from __future__ import annotations

from dataclasses import fields
from functools import partial
from typing import Any

from lib.registry import ModelFamily, config_from_symbols
from gpt2.activations import activations
from gpt2.config import GPT2Config

# GPT2Config field -> Kconfig symbol. Fields map mechanically to GPT2_<FIELD>;
# the attention options keep the names researchers' configs already use.
SYMBOLS = {f.name: "GPT2_" + f.name.upper() for f in fields(GPT2Config)} | {
    "latent_dim": "RA_MLA_LATENT_DIM",
    "rope_dim": "RA_MLA_ROPE_DIM",
    "q_latent": "RA_MLA_PER_HEAD_Q_LATENT",
    "v_up_per_head": "RA_MLA_PER_HEAD_V_UP",
    "ra_alpha": "RA_MLA_RA_ALPHA",
    "ra_window": "RA_MLA_RA_WINDOW",
    "ra_alpha_learned": "RA_MLA_RA_ALPHA_LEARNED",
}
# Attention choice -> run-id tag (the field writes RA+MLA as "ramla"; no
# underscores, so a tag stays one word of the id). The two RA forms get
# different tags so one results table never mixes them.
VARIANT_TAGS = {"vanilla": "vanilla", "sdpa_gate": "sdpagate", "mla": "mla",
                "ra_logit": "ralogit", "ra_mla": "ramla", "ra_gated": "ragated"}


def from_run_config(run: Any, vocab_size: int) -> GPT2Config:
    """Kconfig symbols -> GPT2Config; a size other than "custom" (the GPT2_MODEL
    choice) takes its shape from the preset."""
    if run.get("GPT2_PAD_VOCAB"):
        vocab_size = -(-vocab_size // 64) * 64
    size = run.GPT2_MODEL
    make = GPT2Config if size == "custom" else partial(GPT2Config.from_preset, size)
    return config_from_symbols(make, SYMBOLS, run, vocab_size=vocab_size)


def build(config: GPT2Config):
    from gpt2.model import GPT2  # torch import deferred: config checks stay fast
    return GPT2(config)


def export(*args: Any) -> None:
    from gpt2.export import export as hf_export  # torch import deferred
    hf_export(*args)


def variant(run: Any) -> str:
    return VARIANT_TAGS[run.GPT2_ATTENTION]


# Attention variants a test matrix can enable -> GPT2_ATTENTION value.
MATRIX_ATTENTION = {"GPT2_ATTENTION_ENABLE_VANILLA": "vanilla",
                    "GPT2_ATTENTION_ENABLE_SDPA_GATE": "sdpa_gate",
                    "GPT2_ATTENTION_ENABLE_MLA": "mla",
                    "GPT2_ATTENTION_ENABLE_RA_LOGIT": "ra_logit",
                    "GPT2_ATTENTION_ENABLE_RA_MLA": "ra_mla",
                    "GPT2_ATTENTION_ENABLE_RA_GATED": "ra_gated"}


def matrix_variants(run: Any) -> list[list[tuple[str, str]]]:
    """One override list per attention variant the matrix enables."""
    if not run.get("GPT2_ATTENTION_MULTIPLE"):
        return [[]]
    return [[("GPT2_ATTENTION_MULTIPLE", "n"), ("GPT2_ATTENTION", value)]
            for sym, value in MATRIX_ATTENTION.items() if run.get(sym)]


# The attention variants `make bench-seqlen` compares, in its order.
BENCH_ATTENTION = ("vanilla", "sdpa_gate", "mla", "ra_logit", "ra_gated", "ra_mla")


def bench_models(run: Any, vocab: int, max_len: int, shape: dict[str, int]) -> dict[str, Any]:
    """Every attention variant at the given width and depth, with room for max_len;
    the variants' own options as configured where set, else small defaults."""
    from gpt2.model import GPT2

    latent = run.get("RA_MLA_LATENT_DIM", max(16, shape["n_embd"] // 4))
    alpha = run.get("RA_MLA_RA_ALPHA") or 0.5  # RA's cost is the same for any alpha > 0
    gated = dict(ra_gated_layers=min(run.get("GPT2_RA_GATED_LAYERS", 3), shape["n_layer"]),
                 ra_gated_heads=min(run.get("GPT2_RA_GATED_HEADS", 1), shape["n_head"]))
    return {name: GPT2(GPT2Config(vocab_size=vocab, block_size=max_len, attention=name,
                                  latent_dim=latent,
                                  ra_alpha=alpha if name.startswith("ra") else 0.0,
                                  **gated, **shape))
            for name in BENCH_ATTENTION}


FAMILY = ModelFamily(name="gpt2", label="GPT-2", config_cls=GPT2Config,
                     from_run_config=from_run_config, build=build, variant=variant,
                     activations=activations, matrix_variants=matrix_variants,
                     bench_models=bench_models, export=export)
