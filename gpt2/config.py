"""Hyperparameters of a GPT-2 model, checked when they are created.

Validation happens here rather than deep inside the model so that a bad
value read from .config fails with one line naming the option, instead of
a shape error from somewhere in a matrix multiply.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

from gpt2.presets import PRESETS
from gpt2.variants import ALIASES, names, variant

_POSITIVE_INT_FIELDS = ("vocab_size", "block_size", "n_layer", "n_head", "n_embd")
ATTENTIONS = names()  # the records of gpt2/variants.py
POSITIONS = ("learned", "rope")
NORMS = ("layernorm", "rmsnorm")
MLPS = ("gelu", "swiglu")
GELUS = ("tanh", "exact")  # the GELU MLP's activation (gpt2/mlp.py)
RGSA_CHOICES = {
    "rgsa_routing": ("learned", "random", "dense"),
    "rgsa_chunk_schedule": ("power", "piecewise"),
    "rgsa_chunk_rounding": ("pow2", "multiple_of_8", "nearest"),
}
# Empty is allowed: every length then gets rgsa_chunk_size_max, as in the original.
_PIECEWISE = re.compile(r"(\s*\d+:\d+\s*(,\s*\d+:\d+\s*)*)?")
SWIGLU_MULTIPLE = 64  # SwiGLU hidden widths are rounded up to this (gpt2/mlp.py)


def swiglu_hidden(n_embd: int) -> int:
    """SwiGLU's hidden width: 2/3 * 4 * n_embd rounded up to a multiple of 64."""
    return -(-8 * n_embd // (3 * SWIGLU_MULTIPLE)) * SWIGLU_MULTIPLE


@dataclass(kw_only=True)
class GPT2Config:
    """Shape and regularisation of a GPT-2 model.

    Defaults are GPT-2 small; vocab_size has no default because it depends
    on the tokenizer (and on whether it was padded).
    """

    vocab_size: int
    block_size: int = 1024
    n_layer: int = 12
    n_head: int = 12
    n_embd: int = 768
    dropout: float = 0.0
    bias: bool = True
    # Attention variant: a record of gpt2/variants.py ("vanilla" is GPT-2's;
    # the others gate its output, rebuild keys and values from a latent, or
    # add a reciprocal term in the logit or the gated form).
    attention: str = "vanilla"
    # MLA latent width d_c: the only per-token tensor MLA caches (with the
    # RoPE key). Also the width of the query latent when q_latent is set.
    latent_dim: int = 128
    # MLA low-rank queries: c_Q = W_DQ h (latent_dim wide), then a per-head
    # up-projection W_UQ. False projects queries straight from h.
    q_latent: bool = False
    # True: per-head value up-projection W_UV from the latent (as in the
    # paper). False: one shared head_dim-wide value up-projection whose output
    # every head reads, trading capacity for (n_head - 1) * head_dim * d_c
    # fewer parameters per layer.
    v_up_per_head: bool = True
    # Decoupled RoPE width d_h^R per head for MLA (0 = no rotary part).
    rope_dim: int = 0
    # Reciprocal attention weight alpha; 0 gives the base attention exactly.
    ra_alpha: float = 0.0
    # The reciprocal term only covers keys with i - j <= ra_window; 0 = the
    # whole causal context.
    ra_window: int = 0
    # Logit forms: alpha becomes a learned per-head parameter, initialised at
    # ra_alpha and free to leave [0, 1] in training.
    ra_alpha_learned: bool = False
    # Gated form: the reverse branch runs on this many middle layers ...
    ra_gated_layers: int = 3
    # ... on this many heads of each (the last ones) ...
    ra_gated_heads: int = 1
    # ... and joins through tanh(g), g a learned scalar starting here.
    ra_gated_gate_init: float = 0.0
    # RGSA (gpt2/rgsa.py; defaults are the original project's): tokens per
    # routing chunk, routing embedding width, chunks each query picks, the
    # local window routing leaves out, queries routed together (0 = each),
    # layers sharing one set of chunk embeddings (0 = each its own), and how
    # chunks are picked: "learned" (top-b), "random" or "dense" (no routing).
    rgsa_chunk_size: int = 64
    rgsa_routing_dim: int = 32
    rgsa_top_b: int = 8
    rgsa_local_window: int = 256
    rgsa_route_stride: int = 0
    rgsa_cache_routing_layers: int = 0
    rgsa_routing: str = "learned"
    # Dynamic chunking: the chunk size follows the sequence length by the
    # schedule ("power": T^alpha, "piecewise": "threshold:size,..."), is
    # clamped to [min, max] and rounded ("pow2", "multiple_of_8", "nearest").
    rgsa_dynamic_chunking: bool = False
    rgsa_chunk_size_min: int = 32
    rgsa_chunk_size_max: int = 256
    rgsa_chunk_size_alpha: float = 0.5
    rgsa_chunk_schedule: str = "power"
    rgsa_chunk_piecewise: str = ""
    rgsa_chunk_rounding: str = "pow2"
    # knlp's own MLA family (gpt2/kvsplice.py; defaults are knlp's): the
    # latent width (its MLA_D_LATENT), the KVSplice compression ratio (its
    # MLA_COMPRESSION_RATIO: d_comp = int(latent * ratio)), and how many of
    # the last layers knlp_mla_kv_fim makes KVSplice layers.
    knlp_mla_latent: int = 256
    kvsplice_ratio: float = 0.5
    kvsplice_layers: int = 4
    # Architecture options after GPT-2 (gpt2/Kconfig "Architecture"); each
    # default is GPT-2's, so a config or checkpoint written before they
    # existed loads unchanged.
    # Positions: "learned" (GPT-2's wpe table) or "rope" (rotary on every
    # head's q and k, gpt2/rope.py; MLA gets its positions from its
    # decoupled RoPE, rope_dim > 0).
    position: str = "learned"
    # RoPE frequency base theta, for whole heads and MLA's rotary part.
    rope_theta: float = 10000.0
    # Block and final norm: "layernorm" (GPT-2) or "rmsnorm"; eps for both
    # and for QK-norm (1e-5 is LayerNorm's and GPT-2's).
    norm: str = "layernorm"
    norm_eps: float = 1e-5
    # Feed-forward layer: "gelu" (GPT-2's 4x MLP) or "swiglu" (gpt2/mlp.py).
    mlp: str = "gelu"
    # The GELU MLP's activation: "tanh", the approximation OpenAI's GPT-2 was
    # trained with (its weights expect it), or "exact", the erf form that
    # nanoGPT and the original project (knlp) use; at most 4.7e-4 apart.
    gelu: str = "tanh"
    # Grouped-query attention: key/value heads, each shared by
    # n_head / n_kv_head query heads; 0 (or n_head) is multi-head attention.
    n_kv_head: int = 0
    # RMSNorm on each head's query and key before the dot product.
    qk_norm: bool = False
    # The LM head shares the token embedding's matrix (GPT-2); False gives
    # the head its own vocab_size x n_embd matrix.
    tie_head: bool = True

    def __post_init__(self) -> None:
        for name in _POSITIVE_INT_FIELDS:
            _check_positive_int(name, getattr(self, name))
        _check_dropout(self.dropout)
        for name in (
            "bias",
            "q_latent",
            "v_up_per_head",
            "ra_alpha_learned",
            "qk_norm",
            "tie_head",
            "rgsa_dynamic_chunking",
        ):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(
                    f"{name}={getattr(self, name)!r} is invalid: it must be True or False"
                )
        _check_heads_divide_width(self.n_embd, self.n_head)
        self._check_attention()
        self._check_rgsa()
        self._check_kvsplice()
        self._check_architecture()

    def _check_attention(self) -> None:
        self.attention = ALIASES.get(self.attention, self.attention)
        if self.attention not in ATTENTIONS:
            raise ValueError(
                f"attention={self.attention!r} is invalid: it must be one of {', '.join(ATTENTIONS)}"
            )
        _check_int_range("latent_dim", self.latent_dim, 16, 512)
        _check_int_range("rope_dim", self.rope_dim, 0, 256)
        if self.rope_dim % 2:
            # RoPE rotates pairs of coordinates.
            raise ValueError(f"rope_dim={self.rope_dim} is invalid: it must be even (0 to 256)")
        _check_int_range("ra_window", self.ra_window, 0, self.block_size)
        alpha = self.ra_alpha
        if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 <= alpha <= 1:
            raise ValueError(f"ra_alpha={alpha!r} is invalid: it must be a number in [0, 1]")
        # Checked against the shape only where they apply: the defaults (3
        # layers) must not stop a 2-layer model of another variant.
        gated = variant(self.attention).gated_ra
        limits = (self.n_layer, self.n_head) if gated else (128, 128)
        _check_int_range("ra_gated_layers", self.ra_gated_layers, 1, limits[0])
        _check_int_range("ra_gated_heads", self.ra_gated_heads, 1, limits[1])
        init = self.ra_gated_gate_init
        if isinstance(init, bool) or not isinstance(init, (int, float)) or not -5 <= init <= 5:
            raise ValueError(
                f"ra_gated_gate_init={init!r} is invalid: it must be a number in [-5, 5]"
            )

    def _check_rgsa(self) -> None:
        """The original project's ranges (its gpt2/Kconfig) and ours."""
        for name, low, high in (
            ("rgsa_chunk_size", 16, 256),
            ("rgsa_routing_dim", 8, 128),
            ("rgsa_top_b", 1, 64),
            ("rgsa_local_window", 64, 1024),
            ("rgsa_route_stride", 0, 16384),
            ("rgsa_cache_routing_layers", 0, 128),
            ("rgsa_chunk_size_min", 8, 512),
            ("rgsa_chunk_size_max", 16, 1024),
        ):
            _check_int_range(name, getattr(self, name), low, high)
        _check_number("rgsa_chunk_size_alpha", self.rgsa_chunk_size_alpha, 0.01, 1.0)
        for name, allowed in RGSA_CHOICES.items():
            if getattr(self, name) not in allowed:
                raise ValueError(
                    f"{name}={getattr(self, name)!r} is invalid: it must be one of "
                    f"{', '.join(allowed)}"
                )
        if not variant(self.attention).routed or not self.rgsa_dynamic_chunking:
            return
        if self.rgsa_chunk_size_min > self.rgsa_chunk_size_max:
            raise ValueError(
                f"rgsa_chunk_size_min={self.rgsa_chunk_size_min} is invalid: it must not "
                f"exceed rgsa_chunk_size_max={self.rgsa_chunk_size_max}"
            )
        if self.rgsa_chunk_schedule == "piecewise" and not _PIECEWISE.fullmatch(
            self.rgsa_chunk_piecewise
        ):
            raise ValueError(
                f"rgsa_chunk_piecewise={self.rgsa_chunk_piecewise!r} is invalid: it must be "
                f'"threshold:size" pairs separated by commas, e.g. "512:32,2048:64"'
            )

    def _check_kvsplice(self) -> None:
        """knlp's MLA family: ranges always, the shape where it applies."""
        kind = variant(self.attention)
        _check_int_range("knlp_mla_latent", self.knlp_mla_latent, 16, 1024)
        ratio = self.kvsplice_ratio
        if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not 0 < ratio <= 1:
            raise ValueError(
                f"kvsplice_ratio={ratio!r} is invalid: it must be a number above 0 and at "
                f"most 1 (the compressed width is int(knlp_mla_latent * ratio))"
            )
        # Checked against the depth only where it applies, as ra_gated_layers.
        top = self.n_layer if self.attention == "knlp_mla_kv_fim" else 128
        _check_int_range("kvsplice_layers", self.kvsplice_layers, 1, top)
        if not kind.kvsplice:
            return
        d_comp = kvsplice_width(self)
        if self.attention != "knlp_mla" and (d_comp < 2 or d_comp % 2):
            raise ValueError(
                f"kvsplice_ratio={ratio!r} is invalid with knlp_mla_latent="
                f"{self.knlp_mla_latent}: the compressed width int(latent * ratio) = "
                f"{d_comp} must be even and at least 2, since RoPE rotates pairs; "
                f"pick a ratio giving an even width, e.g. 0.5"
            )
        if self.head_dim % 2:
            raise ValueError(
                f"attention={self.attention!r} is invalid with head_dim={self.head_dim}: "
                f"its RoPE rotates pairs, so n_embd / n_head must be even"
            )
        if self.n_kv_head not in (0, self.n_head) or self.qk_norm:
            raise ValueError(
                f"attention={self.attention!r} is invalid with grouped-query attention "
                f"or QK-norm: knlp's latent layers have neither; set n_kv_head=0 and "
                f"qk_norm=False"
            )

    def _check_architecture(self) -> None:
        for name, allowed in (
            ("position", POSITIONS),
            ("norm", NORMS),
            ("mlp", MLPS),
            ("gelu", GELUS),
        ):
            if getattr(self, name) not in allowed:
                raise ValueError(
                    f"{name}={getattr(self, name)!r} is invalid: it must be one of "
                    f"{', '.join(allowed)}"
                )
        _check_number("rope_theta", self.rope_theta, 100, 1e7)
        _check_number("norm_eps", self.norm_eps, 1e-8, 1e-3)
        _check_int_range("n_kv_head", self.n_kv_head, 0, self.n_head)
        latent = variant(self.attention).latent
        if self.n_kv_head not in (0, self.n_head):
            if latent:
                raise ValueError(
                    f"n_kv_head={self.n_kv_head} is invalid with {self.attention} "
                    f"attention: its keys and values come from a shared latent; "
                    f"use 0"
                )
            if self.n_head % self.n_kv_head:
                raise ValueError(
                    f"n_kv_head={self.n_kv_head} is invalid: it must divide "
                    f"n_head={self.n_head} (each KV head serves a whole group)"
                )
        if self.position == "rope":
            if latent and not self.rope_dim:
                raise ValueError(
                    f"position='rope' is invalid with {self.attention} attention "
                    f"and rope_dim=0: MLA's positions come from its decoupled "
                    f"RoPE; set rope_dim (even, > 0)"
                )
            if not latent and self.head_dim % 2:
                raise ValueError(
                    f"position='rope' is invalid with head_dim={self.head_dim}: "
                    f"RoPE rotates pairs, so n_embd / n_head must be even"
                )

    @property
    def head_dim(self) -> int:
        """Width of one attention head."""
        return self.n_embd // self.n_head

    @property
    def kv_heads(self) -> int:
        """Key/value heads (n_head unless grouped-query attention)."""
        return self.n_kv_head or self.n_head

    @property
    def kv_dim(self) -> int:
        """Width of the keys (or values) of one token: kv_heads * head_dim."""
        return self.kv_heads * self.head_dim

    @property
    def gpt2_layout(self) -> bool:
        """Whether GPT-2's published layout (GPT2LMHeadModel) holds this model:
        vanilla attention and every architecture option at GPT-2's value."""
        return (
            self.attention == "vanilla"
            and self.position == "learned"
            and self.norm == "layernorm"
            and self.norm_eps == 1e-5
            and self.mlp == "gelu"
            and self.kv_heads == self.n_head
            and not self.qk_norm
            and self.tie_head
        )

    @classmethod
    def from_preset(cls, name: str, **overrides: Any) -> GPT2Config:
        """Config for a published size; overrides (vocab_size, block_size, ...) win."""
        key = name.lower()
        if key not in PRESETS:
            known = ", ".join(PRESETS)
            raise ValueError(f"unknown GPT-2 preset {name!r}: known presets are {known}")
        fields = asdict(PRESETS[key])
        fields.update(overrides)
        return cls(**fields)


def kvsplice_width(config: GPT2Config) -> int:
    """KVSplice's compressed width d_comp, knlp's int(d_latent * ratio)."""
    return int(config.knlp_mla_latent * config.kvsplice_ratio)


def _check_positive_int(name: str, value: object) -> None:
    # bool is a subclass of int; True as a layer count is always a mistake.
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name}={value!r} is invalid: it must be a positive integer")
    if value <= 0:
        raise ValueError(f"{name}={value} is invalid: it must be a positive integer")


def _check_int_range(name: str, value: object, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"{name}={value!r} is invalid: it must be an integer from {low} to {high}")


def _check_number(name: str, value: object, low: float, high: float) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        raise ValueError(
            f"{name}={value!r} is invalid: it must be a number from {low:g} to {high:g}"
        )


def _check_dropout(value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"dropout={value!r} is invalid: it must be a number in [0, 1)")
    # 1.0 would zero every activation, so the upper end is excluded.
    if not 0.0 <= value < 1.0:
        raise ValueError(f"dropout={value} is invalid: it must be in [0, 1)")


def _check_heads_divide_width(n_embd: int, n_head: int) -> None:
    if n_embd % n_head == 0:
        return
    lower = n_embd // n_head * n_head
    upper = lower + n_head
    suggestions = f"{lower} or {upper}" if lower > 0 else f"{upper}"
    raise ValueError(
        f"n_embd={n_embd} is not divisible by n_head={n_head}: "
        f"each head needs an equal share of the width; try n_embd={suggestions}"
    )
