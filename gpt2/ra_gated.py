"""Reciprocal attention, gated form (ra_gated): a separately softmaxed
reverse branch added to vanilla attention through a learned tanh gate.

Reference: the original project's current RA, mcgrof/knlp
gpt2/model_knlp.py (CausalSelfAttention_KNLP and GPT2_KNLP; forward
unchanged from commit bcc839a1 to 041ec5f2) and its docs/ra.md. This is a
transcription of what that code computes, not of its text.

Definition. In a reverse layer, with the usual per-head q, k, v of GPT-2's
c_attn and the last n_r heads (ra_gated_heads) taken as the reverse heads,
each reverse head h gives for token i

    R_i = sum_{j <= i} softmax_j(k_i . q_j / sqrt(d)) v_j

that is SDPA with the roles of queries and keys swapped (k as the queries,
q as the keys) under the ordinary causal mask: row i, the token i whose key
now asks, reads only tokens j <= i, so no later token enters. The n_r heads'
outputs are concatenated (n_r * d wide), projected to n_embd by ra_proj,
normalised by ra_norm (LayerNorm) and added to the merged base attention
output before c_proj:

    y = c_proj(merge(SDPA(q, k, v)) + tanh(g) * LN(ra_proj(merge(R))))

g is one learned scalar per reverse layer (ra_gate), initialised at
ra_gated_gate_init; the reference initialises it at 0, so the branch starts
switched off (y is vanilla attention exactly) and training turns it on.
Reverse layers: the ra_gated_layers middle layers, starting at
n_layer // 2 - ra_gated_layers // 2 (5, 6, 7 of GPT-2 small's 12 for 3),
as the reference places them; the other layers are vanilla attention.
Attention dropout applies to both SDPA calls, as in the reference. ra_proj
is initialised like every Linear, N(0, 0.02), without the residual scaling
(its name is not c_proj), as in the reference.

With the output gate (attention "sdpa_gate_ra_gated": the reference with
both GPT2_KNLP_SDPA_GATE and GPT2_KNLP_RA on), every layer multiplies its
merged heads by sigmoid(W_g x + b_g) as gpt2/sdpa_gate.py does, x the
layer's input, and a reverse layer adds its branch after that product, so
the branch itself is not gated by it:

    y = c_proj(merge(SDPA(q, k, v)) * sigmoid(W_g x + b_g)
               + tanh(g) * LN(ra_proj(merge(R))))

the other layers are the output-gated attention. At g = 0 the model is the
output-gated one exactly.

Cache. Token i's reverse row needs the queries of every earlier token, so a
reverse layer caches the reverse heads' queries beside its keys and values:
2 * n_embd + n_r * head_dim elements per token; other layers cache 2 * n_embd
(2 * kv_dim for both with grouped-query attention).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from gpt2.attention import AttentionLayers, CausalSelfAttention, KVCache, causal_mask, merge_heads
from gpt2.config import GPT2Config
from gpt2.norm import make_norm
from gpt2.ra import ReciprocalCache
from gpt2.sdpa_gate import OutputGatedAttention
from gpt2.variants import variant


def reverse_layers(config: GPT2Config) -> range:
    """Indices of the layers with the reverse branch (the reference's middle band)."""
    first = config.n_layer // 2 - config.ra_gated_layers // 2
    return range(first, first + config.ra_gated_layers)


def gated_layer(config: GPT2Config, index: int) -> nn.Module:
    """Layer `index` of a gated-RA model: reverse branch, or vanilla attention
    (output-gated with the output gate)."""
    if index in reverse_layers(config):
        return GatedReciprocalAttention(config)
    if variant(config.attention).output_gate:
        return OutputGatedAttention(config)
    return CausalSelfAttention(config)


def gated_cache(config: GPT2Config, index: int) -> KVCache | ReciprocalCache[KVCache]:
    """Empty generation cache for layer `index`."""
    return ReciprocalCache(KVCache()) if index in reverse_layers(config) else KVCache()


def gated_cache_width(config: GPT2Config, index: int) -> int:
    """Elements layer `index` caches per token (see the module docstring)."""
    extra = config.ra_gated_heads * config.head_dim if index in reverse_layers(config) else 0
    return 2 * config.kv_dim + extra


def gated_pair_width(config: GPT2Config, index: int) -> int:
    """Sum over the layer's heads of w_qk + w_v (flops_per_token): the base
    heads' 2 * head_dim, plus as much again for each reverse head."""
    reverse = config.ra_gated_heads if index in reverse_layers(config) else 0
    return (config.n_head + reverse) * 2 * config.head_dim


class GatedReciprocalAttention(CausalSelfAttention):
    """Vanilla attention plus the gated reverse branch, the heads' output
    gated first where configured; a vanilla (output-gated) state dict loads
    into it except for ra_gate, ra_proj and ra_norm."""

    def __init__(self, config: GPT2Config) -> None:
        super().__init__(config)
        self.reverse_heads = config.ra_gated_heads
        self.ra_gate = nn.Parameter(torch.full((1,), float(config.ra_gated_gate_init)))
        self.ra_proj = nn.Linear(
            config.ra_gated_heads * config.head_dim, config.n_embd, bias=config.bias
        )
        # GPT-2's LayerNorm, or RMSNorm with config.norm (the model's norm throughout)
        self.ra_norm = make_norm(config, config.n_embd)
        # the output gate's parameter name, so an output-gated state dict loads
        self.output_gate = (
            nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
            if variant(config.attention).output_gate
            else None
        )

    def forward(self, x: Tensor, cache: ReciprocalCache[KVCache] | KVCache | None = None) -> Tensor:
        """x: [B, T, C]. With a cache, x holds only the tokens after it."""
        # a reverse row reads every earlier token's query: gated_cache keeps them
        assert not isinstance(cache, KVCache), "a reverse layer's cache is a ReciprocalCache"
        n_past = 0 if cache is None else cache.pos
        q, k, v = self.qkv(x, n_past)
        heads = slice(self.n_head - self.reverse_heads, self.n_head)
        q_all = q[:, heads]
        if cache is not None:
            k, v = cache.base.append(k, v)
            q_all = cache.append_q(q_all)
        y = merge_heads(self.attend(q, k, v, n_past))
        if self.output_gate is not None:  # before the branch joins, as the reference
            y = y * torch.sigmoid(self.output_gate(x))
        # A reverse head reads its query head's key and value head (GQA: the group's).
        k, v = self.expand_kv(k), self.expand_kv(v)
        reverse = merge_heads(self.reverse(k[:, heads, n_past:], q_all, v[:, heads], n_past))
        y = y + torch.tanh(self.ra_gate) * self.ra_norm(self.ra_proj(reverse))
        return self.resid_dropout(self.c_proj(y))

    def reverse(self, k_new: Tensor, q_all: Tensor, v: Tensor, n_past: int) -> Tensor:
        """SDPA(k, q, v): the new tokens' keys ask, every token's query answers.

        k_new: [B, n_r, T, D]; q_all, v: [B, n_r, S, D] for all S = n_past + T
        tokens. The mask is the base attention's: row n_past + t sees
        columns 0 .. n_past + t.
        """
        mask, is_causal = causal_mask(k_new.size(2), n_past, k_new.device)
        return F.scaled_dot_product_attention(
            k_new,
            q_all,
            v,
            attn_mask=mask,
            dropout_p=self.dropout if self.training else 0.0,
            is_causal=is_causal,
        )


# Both gated variants (ra_gated, sdpa_gate_ra_gated): gated_layer reads the output gate
RA_GATED = AttentionLayers(gated_layer, gated_cache, gated_cache_width, gated_pair_width)
