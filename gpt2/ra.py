"""Reciprocal attention (RA): each score also hears the reverse direction.

Definition. With S_ij = q_i . k_j / sqrt(d) (query i, key j, d the q/k
head width), the logit of query i for key j is

    L_ij = S_ij + alpha * S_ji * [i - j <= window]    for j <= i
    L_ij = -inf                                       for j >  i

where S_ji = q_j . k_i / sqrt(d) is how strongly the earlier token j, as a
query, matches the current token i as a key. window = 0 means no band (the
whole causal context). Both q_j and k_i come from positions <= i, so the
reciprocal term adds no future information: the causal mask is applied to
L as a whole, and S_ji is only ever used for j <= i. The band restricts
only the reciprocal term; S_ij covers the whole causal context as usual.
alpha = 0 short-circuits to the base attention, bit for bit.

Fused path. Without a band, S + alpha * S^T is one dot product of
augmented vectors: q'_i = [q_i, sqrt(alpha) k_i], k'_j = [k_j, sqrt(alpha) q_j]
give q'_i . k'_j = q_i . k_j + alpha q_j . k_i. That runs as a single
scaled_dot_product_attention call (scale 1/sqrt(d) passed explicitly, since
the augmented width is 2d), which torch.compile and flash kernels handle.
A finite band needs the scores written out (_banded).

Cache. The reciprocal term for a new token i needs q_j of every earlier
token j, so a generation cache holds the base cache plus each token's
per-head queries: 3 * n_embd elements per token and layer over vanilla
projections (k, v, q), latent_dim + rope_dim + n_head * (head_dim +
rope_dim) over MLA. Storing q undoes much of MLA's saving; that is the
price of the reciprocal term. With alpha = 0 the plain base cache is used.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from gpt2.attention import CausalSelfAttention, KVCache, causal_mask
from gpt2.config import GPT2Config
from gpt2.mla import LatentCache, MLAttention, latent_cache_width


@dataclass
class ReciprocalCache:
    """A base cache (keys/values or MLA latents) plus every token's queries.

    q is [B, H, T_cache, Dq] or None before the first token.
    """

    base: KVCache | LatentCache
    q: Tensor | None = None

    @property
    def pos(self) -> int:
        """Number of tokens cached, which is also the next token's position."""
        return self.base.pos

    def append_q(self, q: Tensor) -> Tensor:
        """Add the new tokens' queries; return the queries of every token so far."""
        self.q = q if self.q is None else torch.cat((self.q, q), dim=2)
        return self.q


def new_ra_cache(config: GPT2Config) -> KVCache | LatentCache | ReciprocalCache:
    """Empty cache for one RA layer; alpha = 0 needs only the base cache."""
    base = LatentCache() if config.attention == "ra_mla" else KVCache()
    return base if config.ra_alpha == 0 else ReciprocalCache(base)


def ra_cache_width(config: GPT2Config) -> int:
    """Elements one RA layer caches per token (see the module docstring)."""
    if config.attention == "ra_mla":
        base = latent_cache_width(config)
        q_width = config.n_head * (config.head_dim + config.rope_dim)
    else:
        base, q_width = 2 * config.n_embd, config.n_embd
    return base if config.ra_alpha == 0 else base + q_width


def reciprocal_attention(
    q: Tensor, k: Tensor, v: Tensor, q_all: Tensor, n_past: int,
    alpha: float, window: int, dropout_p: float = 0.0,
) -> Tensor:
    """RA output [B, H, T, Dv] for T new queries after n_past cached tokens.

    q: [B, H, T, D] new queries; k, q_all: [B, H, S, D] keys and queries of
    all S = n_past + T tokens; v: [B, H, S, Dv]. Scale is 1/sqrt(D).
    """
    if window == 0 or window >= k.size(2):
        return fused_reciprocal(q, k, v, q_all, n_past, alpha, dropout_p)
    return banded_reciprocal(q, k, v, q_all, n_past, alpha, window, dropout_p)


def fused_reciprocal(
    q: Tensor, k: Tensor, v: Tensor, q_all: Tensor, n_past: int,
    alpha: float, dropout_p: float = 0.0,
) -> Tensor:
    """Whole-context RA as one SDPA call on augmented queries and keys."""
    root = math.sqrt(alpha)
    k_new = k[:, :, n_past:]
    q_aug = torch.cat((q, root * k_new), dim=-1)
    k_aug = torch.cat((k, root * q_all), dim=-1)
    mask, is_causal = causal_mask(q.size(2), n_past, q.device)
    return F.scaled_dot_product_attention(
        q_aug, k_aug, v, attn_mask=mask, dropout_p=dropout_p, is_causal=is_causal,
        # The augmented width is 2D, but the logits are sums of D-wide products.
        scale=1.0 / math.sqrt(q.size(-1)),
    )


def banded_reciprocal(
    q: Tensor, k: Tensor, v: Tensor, q_all: Tensor, n_past: int,
    alpha: float, window: int, dropout_p: float = 0.0,
) -> Tensor:
    """RA with the reciprocal term limited to i - j <= window, scores explicit."""
    n_new, n_all = q.size(2), k.size(2)
    scale = 1.0 / math.sqrt(q.size(-1))
    direct = q @ k.transpose(-2, -1)  # [B, H, T, S]: q_i . k_j
    # reverse[i, j] = k_i . q_j, i.e. S_ji before scaling.
    reverse = k[:, :, n_past:] @ q_all.transpose(-2, -1)
    rows = torch.arange(n_past, n_past + n_new, device=q.device).unsqueeze(1)
    lag = rows - torch.arange(n_all, device=q.device).unsqueeze(0)  # i - j
    band = (lag >= 0) & (lag <= window)
    logits = (direct + alpha * reverse.masked_fill(~band, 0.0)) * scale
    logits = logits.masked_fill(lag < 0, float("-inf"))
    weights = F.dropout(F.softmax(logits, dim=-1), p=dropout_p, training=dropout_p > 0)
    return weights @ v


def _attend(module: CausalSelfAttention | MLAttention, q: Tensor, k: Tensor, v: Tensor,
            n_past: int, cache: ReciprocalCache | None) -> Tensor:
    """Store the new queries in the cache, then run RA for them."""
    q_all = q if cache is None else cache.append_q(q)
    return reciprocal_attention(
        q, k, v, q_all, n_past, module.alpha, module.window,
        dropout_p=module.dropout if module.training else 0.0,
    )


class ReciprocalSelfAttention(CausalSelfAttention):
    """RA over GPT-2's projections; same module names as the vanilla layer,
    so a vanilla state dict loads into it."""

    def __init__(self, config: GPT2Config) -> None:
        super().__init__(config)
        self.alpha = float(config.ra_alpha)
        self.window = config.ra_window

    def forward(self, x: Tensor, cache: ReciprocalCache | KVCache | None = None) -> Tensor:
        """x: [B, T, C]. With a cache, x holds only the tokens after it."""
        if self.alpha == 0:
            return super().forward(x, cache)  # type: ignore[arg-type]
        batch, n_new, width = x.shape
        q, k, v = (self._split_heads(t) for t in self.c_attn(x).split(self.n_embd, dim=2))
        n_past = 0
        if cache is not None:
            n_past = cache.pos
            k, v = cache.base.append(k, v)  # type: ignore[union-attr]
        y = _attend(self, q, k, v, n_past, cache)  # type: ignore[arg-type]
        y = y.transpose(1, 2).contiguous().view(batch, n_new, width)
        return self.resid_dropout(self.c_proj(y))


class ReciprocalMLA(MLAttention):
    """RA over MLA's queries and keys (content and RoPE parts together);
    same module names as MLAttention."""

    def __init__(self, config: GPT2Config) -> None:
        super().__init__(config)
        self.alpha = float(config.ra_alpha)
        self.window = config.ra_window

    def forward(self, x: Tensor, cache: ReciprocalCache | LatentCache | None = None) -> Tensor:
        """x: [B, T, C]. With a cache, x holds only the tokens after it."""
        if self.alpha == 0:
            return super().forward(x, cache)  # type: ignore[arg-type]
        base = None if cache is None else cache.base  # type: ignore[union-attr]
        q, k, v, n_past = self.project(x, base)  # type: ignore[arg-type]
        return self.output(_attend(self, q, k, v, n_past, cache))  # type: ignore[arg-type]
