"""Causal multi-head self-attention with an optional key/value cache.

The cache lets generation feed one new token per step: keys and values of
earlier tokens never change (attention is causal), so recomputing them for
every generated token would repeat work that grows with the context.

Options after GPT-2 (GPT2Config), shared by every layer built on this one
(the SDPA gate, both RA forms): grouped-query attention (Ainslie et al.
2023, "GQA", arXiv 2305.13245) projects n_kv_head key/value heads, each
read by n_head / n_kv_head query heads, and caches only those (2 * kv_dim
elements per token instead of 2 * n_embd); QK-norm (gpt2/norm.py) and
RoPE (gpt2/rope.py) act on each head's q and k, in that order, before the
keys enter the cache, so a cached key is already rotated at its position.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from gpt2.config import GPT2Config
from gpt2.norm import head_norm, normed
from gpt2.rope import rotary


@dataclass
class KVCache:
    """Keys and values one attention layer has produced so far.

    k and v have shape [B, H, T_cache, D] (batch, heads, cached tokens,
    head width), or are None before the first token. A model keeps one
    KVCache per layer. The position is derived from the stored tensors, so
    it can never disagree with them.

    Growth is by concatenation: simple, and the copy is small next to the
    attention itself for the context lengths this project trains.
    """

    k: Tensor | None = None
    v: Tensor | None = None

    @property
    def pos(self) -> int:
        """Number of tokens cached, which is also the next token's position."""
        return 0 if self.k is None else self.k.size(2)

    def append(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Add the new tokens' keys and values; return all keys and values."""
        if self.k is None or self.v is None:
            self.k, self.v = k, v
        else:
            self.k = torch.cat((self.k, k), dim=2)
            self.v = torch.cat((self.v, v), dim=2)
        return self.k, self.v


def causal_mask(n_new: int, n_past: int, device: torch.device) -> tuple[Tensor | None, bool]:
    """Mask for n_new queries that follow n_past cached tokens.

    Returns (attn_mask, is_causal) for scaled_dot_product_attention. With no
    past the built-in causal mask is right. A single new token may see every
    cached token and itself, so no mask at all. Several new tokens after a
    non-empty cache need an explicit mask: SDPA's is_causal aligns the
    triangle to the top-left corner, which would hide cached keys from them.
    """
    if n_past == 0:
        return None, True
    if n_new == 1:
        return None, False
    # Query i sits at absolute position n_past + i and may see keys 0..n_past+i.
    allowed = torch.ones(n_new, n_past + n_new, dtype=torch.bool, device=device)
    return allowed.tril(diagonal=n_past), False


class CausalSelfAttention(nn.Module):
    """GPT-2 attention: fused q/k/v projection, SDPA, output projection."""

    def __init__(self, config: GPT2Config) -> None:
        super().__init__()
        self.n_head = config.n_head
        self.n_embd = config.n_embd
        self.head_dim = config.head_dim
        self.n_kv_head = config.kv_heads
        self.kv_dim = config.kv_dim
        self.dropout = config.dropout
        self.rope_theta = config.rope_theta if config.position == "rope" else None
        # One matrix for q, k and v: a single larger matmul is faster than
        # three, and it matches the layout of GPT-2's published weights.
        self.c_attn = nn.Linear(config.n_embd, config.n_embd + 2 * self.kv_dim, bias=config.bias)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.resid_dropout = nn.Dropout(config.dropout)
        self.q_norm = head_norm(config, config.head_dim) if config.qk_norm else None
        self.k_norm = head_norm(config, config.head_dim) if config.qk_norm else None

    def forward(self, x: Tensor, cache: KVCache | None = None) -> Tensor:
        """x: [B, T, C]. With a cache, x holds only the tokens after it."""
        return self.resid_dropout(self.c_proj(self.heads_output(x, cache)))

    def heads_output(self, x: Tensor, cache: KVCache | None = None) -> Tensor:
        """The heads' outputs, merged to [B, T, C], before the output projection."""
        n_past = 0 if cache is None else cache.pos
        q, k, v = self.qkv(x, n_past)
        if cache is not None:
            k, v = cache.append(k, v)
        return merge_heads(self.attend(q, k, v, n_past))

    def qkv(self, x: Tensor, n_past: int) -> tuple[Tensor, Tensor, Tensor]:
        """Queries [B, H, T, D], keys and values [B, H_kv, T, D] of the tokens
        x, which follow n_past others: normalised (QK-norm) and rotated
        (RoPE) where configured."""
        batch, seq, _ = x.shape
        # [B, T, h, D] views; norm and rotation act on them before the heads
        # move forward, so their outputs keep c_attn's token-major layout, in
        # which SDPA's output merges back to [B, T, C] without a copy.
        q, k, v = (
            t.view(batch, seq, -1, self.head_dim)
            for t in self.c_attn(x).split((self.n_embd, self.kv_dim, self.kv_dim), dim=2)
        )
        if self.q_norm is not None and self.k_norm is not None:
            q, k = normed(self.q_norm, q), normed(self.k_norm, k)
        if self.rope_theta is not None:
            q = rotary(q, n_past, self.rope_theta, seq_dim=-3)
            k = rotary(k, n_past, self.rope_theta, seq_dim=-3)
        return q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)

    def attend(self, q: Tensor, k: Tensor, v: Tensor, n_past: int) -> Tensor:
        """Causal SDPA of the new queries q over all keys k and values v
        (with GQA, k and v have fewer heads: each serves a group of q's)."""
        mask, is_causal = causal_mask(q.size(2), n_past, q.device)
        return F.scaled_dot_product_attention(
            q,
            k,
            v,
            attn_mask=mask,
            # Attention dropout is a training regulariser only.
            dropout_p=self.dropout if self.training else 0.0,
            is_causal=is_causal,
            enable_gqa=k.size(1) != q.size(1),
        )

    def expand_kv(self, t: Tensor) -> Tensor:
        """[B, H_kv, S, D] -> [B, H, S, D], each KV head repeated for its group
        of query heads (for the RA forms, which pair every query head with
        its own key head)."""
        groups = self.n_head // t.size(1)
        return t if groups == 1 else t.repeat_interleave(groups, dim=1)

    def _split_heads(self, t: Tensor) -> Tensor:
        """[B, T, h * D] -> [B, h, T, D], h query or key/value heads."""
        batch, seq, width = t.shape
        return t.view(batch, seq, width // self.head_dim, self.head_dim).transpose(1, 2)


def merge_heads(y: Tensor) -> Tensor:
    """[B, H, T, D] -> [B, T, H * D]."""
    batch, heads, seq, width = y.shape
    return y.transpose(1, 2).contiguous().view(batch, seq, heads * width)


@dataclass(frozen=True)
class AttentionLayers:
    """How the model builds one attention variant (its record in gpt2/variants.py
    names this), layer by layer: each callable takes the config and the layer
    index, since the gated RA form differs between layers. The layer, its empty
    generation cache, the elements that cache holds per token, and for
    flops_per_token the sum over the layer's heads of w_qk + w_v, the widths of
    a query-key and a weight-value product."""

    layer: Callable[[GPT2Config, int], nn.Module]
    new_cache: Callable[[GPT2Config, int], Any]
    cache_width: Callable[[GPT2Config, int], int]
    pair_width: Callable[[GPT2Config, int], int]
    # Every layer at once, for a variant whose layers share modules (RGSA's
    # chunk router); None builds them one by one with `layer`.
    build_all: Callable[[GPT2Config], list[nn.Module]] | None = None

    def build(self, config: GPT2Config) -> list[nn.Module]:
        """The n_layer attention layers of one model."""
        if self.build_all is not None:
            return self.build_all(config)
        return [self.layer(config, i) for i in range(config.n_layer)]


def same_every_layer(
    layer: Callable[[GPT2Config], nn.Module],
    new_cache: Callable[[GPT2Config], Any],
    cache_width: Callable[[GPT2Config], int],
    score_width: Callable[[GPT2Config], int],
) -> AttentionLayers:
    """A variant whose layers are all alike, from per-head score widths."""
    return AttentionLayers(
        lambda c, i: layer(c),
        lambda c, i: new_cache(c),
        lambda c, i: cache_width(c),
        lambda c, i: c.n_head * (score_width(c) + c.head_dim),
    )


def kv_cache_width(config: GPT2Config) -> int:
    """Keys and values of every KV head: 2 * kv_dim per token."""
    return 2 * config.kv_dim


VANILLA = same_every_layer(
    CausalSelfAttention, lambda c: KVCache(), kv_cache_width, lambda c: c.head_dim
)
