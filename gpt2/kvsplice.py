"""The original project's own latent attention: its "MLA" and "KVSplice" layers.

Reference: mcgrof/knlp gpt2/mla.py at 041ec5f2 (MLA_Flash, MLA_KVSplice and
the GPT2_MLA, GPT2_MLA_KV, GPT2_MLA_KV_FIM models its gpt2/trainers/vanilla.py
builds when ENABLE_MLA=y with MLA_VARIANT "mla", "mla_kv" or "mla_kv_fim").
This is a transcription of what that code computes, not of its text. It is
not DeepSeek-V2's MLA (gpt2/mla.py): no decoupled rotary key, and RoPE on
whole heads on top of GPT-2's learned position table.

knlp_mla, every layer (knlp's MLA_Flash): queries q = W_q x; a latent
l = to_kv_latent x (knlp_mla_latent wide, knlp's MLA_D_LATENT); keys and
values [k, v] = from_kv_latent l (keys first, then values, each split into
heads); RoPE ("rotate half", base rope_theta, over the whole head) on q and
k; causal SDPA with attention dropout in training; heads merged; out_proj.
All four Linears are biased (with config.bias, knlp's always are), and the
output has no residual dropout (vanilla GPT-2's has). The generation cache
is l: knlp_mla_latent numbers per token.

knlp_mla_kv, every layer (knlp's MLA_KVSplice on the path it runs,
use_compressed_attn): l = to_kv_latent x (no bias); the cached
c = LayerNorm(compress l), d_comp = int(knlp_mla_latent * kvsplice_ratio)
wide (knlp's MLA_COMPRESSION_RATIO); ONE head of width d_comp:
q = q_proj_compressed c, [k, v] = kv_proj_compressed c (keys first), RoPE
over d_comp, causal SDPA; z = comp2lat(out) back to the latent width; the
output is z @ to_kv_latent.weight (the input map, reused transposed) plus
out_residual z, the only biased Linear. The cache is c: d_comp per token.

knlp_mla_kv_fim (knlp's GPT2_MLA_KV_FIM): the first n_layer - kvsplice_layers
layers are knlp_mla's, the last kvsplice_layers knlp_mla_kv's (knlp reads
MLA_KV_FIM_LAYERS, absent from its Kconfig, so always 4 there).

Initialisation: knlp initialises its whole model after building it, every
Linear N(0, 0.02) with zero biases and no scaled residual projections (so
out_residual, which it zero-initialises in the layer, ends N(0, 0.02) too).
The variants' records say plain_init, which tells gpt2/model.py to skip its
1/sqrt(2 n_layer) scaling of attention and MLP output projections.

Where this differs from knlp, on purpose:
* knlp's MLA_KVSplice also builds W_q, from_kv_latent, out_proj,
  kvsplice.expand and a latent-width RoPE table that the path it runs never
  reads; they never get a gradient, so AdamW never changes them and they
  cannot affect training. They are not built here, so each knlp_mla_kv
  layer has 2 C (C + 1) + 2 C (L + 1) + d_comp L fewer parameters than
  knlp's printed count (C = n_embd, L = knlp_mla_latent: W_q and out_proj,
  from_kv_latent, expand); 1.61 M per layer for GPT-2 124M's defaults.
* knlp's kvsplice forward draws torch.rand(1) on every training step to log
  a reconstruction error 1 % of the time; that is a metric only and is
  skipped, so these layers consume no random numbers beyond dropout's.
* knlp's cached generation passes is_causal=True with a cache, which is
  wrong whenever new tokens follow cached ones (SDPA aligns the triangle to
  the top-left corner, so even a single new token sees only the first
  cached one); here the mask comes from attention.causal_mask, so a cached
  forward equals the full one.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from gpt2.attention import AttentionLayers, causal_mask, merge_heads
from gpt2.config import GPT2Config, kvsplice_width
from gpt2.rope import rotary


@dataclass
class RowCache:
    """The one tensor a layer of this family caches: [B, T_cache, width]
    (knlp_mla's latent or knlp_mla_kv's compressed c), None before any token."""

    rows: Tensor | None = None

    @property
    def pos(self) -> int:
        """Number of tokens cached, which is also the next token's position."""
        return 0 if self.rows is None else self.rows.size(1)

    def append(self, new: Tensor) -> Tensor:
        """Add the new tokens' rows; return those of every token so far."""
        self.rows = new if self.rows is None else torch.cat((self.rows, new), dim=1)
        return self.rows


def _attend(q: Tensor, k: Tensor, v: Tensor, n_past: int, dropout: float) -> Tensor:
    """Causal SDPA of the new queries over every key, right after a cache too."""
    mask, is_causal = causal_mask(q.size(2), n_past, q.device)
    return F.scaled_dot_product_attention(
        q, k, v, attn_mask=mask, dropout_p=dropout, is_causal=is_causal
    )


class KnlpMLAttention(nn.Module):
    """knlp's MLA layer (module docstring); knlp's module names."""

    def __init__(self, config: GPT2Config) -> None:
        super().__init__()
        width, latent, bias = config.n_embd, config.knlp_mla_latent, config.bias
        self.n_head, self.head_dim = config.n_head, config.head_dim
        self.rope_theta, self.dropout = config.rope_theta, config.dropout
        self.W_q = nn.Linear(width, width, bias=bias)
        self.to_kv_latent = nn.Linear(width, latent, bias=bias)
        self.from_kv_latent = nn.Linear(latent, 2 * width, bias=bias)
        self.out_proj = nn.Linear(width, width, bias=bias)

    def forward(self, x: Tensor, cache: RowCache | None = None) -> Tensor:
        """x: [B, T, C]. With a cache, x holds only the tokens after it."""
        batch, seq, _ = x.shape
        n_past = 0 if cache is None else cache.pos
        latent = self.to_kv_latent(x)
        if cache is not None:
            latent = cache.append(latent)
        q = self.W_q(x).view(batch, seq, self.n_head, self.head_dim)
        kv = self.from_kv_latent(latent).view(batch, latent.size(1), 2, self.n_head, -1)
        # Rotated in [B, T, H, D] (positions absolute: the cache is not rotated).
        q = rotary(q, n_past, self.rope_theta, seq_dim=-3).transpose(1, 2)
        k = rotary(kv[:, :, 0], 0, self.rope_theta, seq_dim=-3).transpose(1, 2)
        v = kv[:, :, 1].transpose(1, 2)
        y = _attend(q, k, v, n_past, self.dropout if self.training else 0.0)
        return self.out_proj(merge_heads(y))


class Splice(nn.Module):
    """knlp's LearnedKVSplice, the half its attention uses: compress the
    latent to d_comp and LayerNorm it (the cached c)."""

    def __init__(self, latent: int, d_comp: int, bias: bool) -> None:
        super().__init__()
        self.compress = nn.Linear(latent, d_comp, bias=False)
        self.latent_ln = nn.LayerNorm(d_comp, bias=bias)

    def forward(self, latent: Tensor) -> Tensor:
        return self.latent_ln(self.compress(latent))


class KVSpliceAttention(nn.Module):
    """knlp's MLA_KVSplice, its compressed single-head path (module docstring)."""

    def __init__(self, config: GPT2Config) -> None:
        super().__init__()
        width, latent = config.n_embd, config.knlp_mla_latent
        d_comp = self.d_comp = kvsplice_width(config)
        self.rope_theta, self.dropout = config.rope_theta, config.dropout
        self.to_kv_latent = nn.Linear(width, latent, bias=False)
        self.kvsplice = Splice(latent, d_comp, config.bias)
        self.q_proj_compressed = nn.Linear(d_comp, d_comp, bias=False)
        self.kv_proj_compressed = nn.Linear(d_comp, 2 * d_comp, bias=False)
        self.comp2lat = nn.Linear(d_comp, latent, bias=False)
        self.out_residual = nn.Linear(latent, width, bias=config.bias)

    def forward(self, x: Tensor, cache: RowCache | None = None) -> Tensor:
        """x: [B, T, C]. With a cache, x holds only the tokens after it."""
        n_past = 0 if cache is None else cache.pos
        c = self.kvsplice(self.to_kv_latent(x))
        q = self.q_proj_compressed(c)
        if cache is not None:
            c = cache.append(c)
        k, v = self.kv_proj_compressed(c).split(self.d_comp, dim=-1)
        # One head: [B, 1, T, d_comp].
        q = rotary(q, n_past, self.rope_theta).unsqueeze(1)
        k = rotary(k, 0, self.rope_theta).unsqueeze(1)
        y = _attend(q, k, v.unsqueeze(1), n_past, self.dropout if self.training else 0.0)
        z = self.comp2lat(y.squeeze(1))
        # The input map reused transposed, plus a learned correction.
        return z @ self.to_kv_latent.weight + self.out_residual(z)


def spliced(config: GPT2Config, index: int) -> bool:
    """Whether layer `index` is a KVSplice layer (the rest are knlp_mla's)."""
    if config.attention == "knlp_mla_kv":
        return True
    if config.attention == "knlp_mla_kv_fim":
        return index >= config.n_layer - config.kvsplice_layers
    return False


def _layer(config: GPT2Config, index: int) -> nn.Module:
    return KVSpliceAttention(config) if spliced(config, index) else KnlpMLAttention(config)


def _cache_width(config: GPT2Config, index: int) -> int:
    return kvsplice_width(config) if spliced(config, index) else config.knlp_mla_latent


def _pair_width(config: GPT2Config, index: int) -> int:
    """Per layer, over its heads, w_qk + w_v: one d_comp-wide head for
    KVSplice, n_head head_dim-wide heads for MLA."""
    if spliced(config, index):
        return 2 * kvsplice_width(config)
    return config.n_head * 2 * config.head_dim


# One record serves all three variants: the layer index and config.attention
# decide which layer each index gets.
KNLP_MLA = AttentionLayers(
    layer=_layer,
    new_cache=lambda c, i: RowCache(),
    cache_width=_cache_width,
    pair_width=_pair_width,
)
