"""GPT-2's attention variants: one record each, everything else derived.

A record says what the rest of the project needs to know about a variant:
its GPT2Config.attention name (also the value of the Kconfig choice
GPT2_ATTENTION), the tag run ids carry, the two Kconfig symbols (the choice
member GPT2_ATTENTION_<NAME> and the test-matrix switch
GPT2_ATTENTION_ENABLE_<NAME>, both written by hand in gpt2/Kconfig), where its
layers are built (`layers`: "module:ATTRIBUTE" of a gpt2/ module holding an
attention.AttentionLayers), whether `make bench-seqlen` compares it, and the
traits the config checks and the memory estimate read (gpt2/activations.py).

Adding a variant is one module (its layer and an AttentionLayers) and one
record here, plus its two Kconfig entries; tests/gpt2/test_gpt2_variant_registry.py
does exactly that in a scratch copy of the project. This file imports no
torch: configuration checks read it without building a model.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import import_module
from typing import Any


@dataclass(frozen=True)
class Variant:
    name: str
    tag: str  # run-id tag: one word, no underscores, so it stays one part of the id
    layers: str  # "module:ATTRIBUTE" in gpt2/, an attention.AttentionLayers
    bench: bool = True  # compared by `make bench-seqlen`
    # Traits (the layer module knows the rest):
    latent: bool = False  # keys and values rebuilt from a latent (MLA): no KV heads to group
    reciprocal: bool = False  # the logit form of RA (gpt2/ra.py): ra_alpha and ra_window apply
    output_gate: bool = False  # a sigmoid gate on the heads' output (gpt2/sdpa_gate.py)
    gated_ra: bool = False  # the gated reverse-SDPA branch (gpt2/ra_gated.py)
    routed: bool = False  # RGSA's chunk routing (gpt2/rgsa.py): the GPT2_RGSA_* settings apply
    # knlp's own latent family (gpt2/kvsplice.py): GPT2_KNLP_MLA_LATENT, GPT2_KVSPLICE_* apply
    kvsplice: bool = False
    # Every Linear N(0, 0.02), no 1/sqrt(2 n_layer) on the output projections (knlp's init)
    plain_init: bool = False
    aliases: tuple[str, ...] = ()  # names earlier versions wrote into configs and checkpoints

    @property
    def choice_symbol(self) -> str:
        """The GPT2_ATTENTION member selecting it (its value is the name)."""
        return "GPT2_ATTENTION_" + self.name.upper()

    @property
    def matrix_symbol(self) -> str:
        """The bool that enables it in a test matrix (GPT2_ATTENTION_MULTIPLE)."""
        return "GPT2_ATTENTION_ENABLE_" + self.name.upper()


# In the order menus, matrices and error messages list them.
VARIANTS: tuple[Variant, ...] = (
    Variant("vanilla", "vanilla", "attention:VANILLA"),
    Variant("sdpa_gate", "sdpagate", "sdpa_gate:SDPA_GATE", output_gate=True),
    Variant("mla", "mla", "mla:MLA", latent=True),
    # The two RA forms get different tags so one results table never mixes them.
    Variant("ra_logit", "ralogit", "ra:RA_LOGIT", reciprocal=True, aliases=("ra",)),
    Variant("ra_mla", "ramla", "ra:RA_MLA", latent=True, reciprocal=True),
    Variant("ra_gated", "ragated", "ra_gated:RA_GATED", gated_ra=True),
    Variant(
        "sdpa_gate_ra_gated",
        "sdpagateragated",
        "ra_gated:RA_GATED",
        bench=False,
        output_gate=True,
        gated_ra=True,
    ),
    # Dense attention plus a router whose choices only feed metrics (gpt2/rgsa.py).
    Variant("rgsa", "rgsa", "rgsa:RGSA", bench=False, routed=True),
    # knlp's MLA and KVSplice (gpt2/kvsplice.py), not DeepSeek's MLA above.
    Variant(
        "knlp_mla", "knlpmla", "kvsplice:KNLP_MLA", bench=False, kvsplice=True, plain_init=True
    ),
    Variant(
        "knlp_mla_kv",
        "knlpmlakv",
        "kvsplice:KNLP_MLA",
        bench=False,
        kvsplice=True,
        plain_init=True,
    ),
    Variant(
        "knlp_mla_kv_fim",
        "knlpmlakvfim",
        "kvsplice:KNLP_MLA",
        bench=False,
        kvsplice=True,
        plain_init=True,
    ),
)
BY_NAME = {v.name: v for v in VARIANTS}
ALIASES = {alias: v.name for v in VARIANTS for alias in v.aliases}


def variant(name: str) -> Variant:
    """The record of GPT2Config.attention `name` (an earlier name too)."""
    return BY_NAME[ALIASES.get(name, name)]


def names(**traits: bool) -> tuple[str, ...]:
    """The variants' names, those with the given trait values only."""
    return tuple(
        v.name for v in VARIANTS if all(getattr(v, trait) == want for trait, want in traits.items())
    )


def layers(name: str) -> Any:
    """The variant's attention.AttentionLayers, its module imported on first
    use. In an exported folder (lib/model/remote/source.py) the modules lie
    flat beside this one, gpt2/ra.py as gpt2_ra.py: the same prefix as this
    file's own name."""
    module, _, attribute = variant(name).layers.partition(":")
    prefix = __name__.rpartition(".")[2][: -len("variants")]  # "" here, "gpt2_" there
    return getattr(import_module(f".{prefix}{module}", __package__), attribute)


def modules() -> list[str]:
    """Every module a variant's layers live in (what an export must carry)."""
    return list(dict.fromkeys(f"gpt2.{v.layers.partition(':')[0]}" for v in VARIANTS))
