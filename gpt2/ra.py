"""Reciprocal attention, logit form (ra_logit, ra_mla): each score also
hears the reverse direction. (The gated form, a separately softmaxed
reverse branch, is gpt2/ra_gated.py.)

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

Learned alpha (ra_alpha_learned, our option): alpha becomes one parameter
per head, initialised at ra_alpha and unconstrained in training (it may
leave [0, 1] or turn negative); the reciprocal path then always runs, even
from alpha = 0, so the gradient can move it.

Fused path. Without a band, S + alpha * S^T is one dot product of
augmented vectors: q'_i = [q_i, sqrt(alpha) k_i], k'_j = [k_j, sqrt(alpha) q_j]
give q'_i . k'_j = q_i . k_j + alpha q_j . k_i (a learned alpha, which may
be negative, goes wholly on the query side: [q_i, alpha k_i], [k_j, q_j]). That runs as a single
scaled_dot_product_attention call (scale 1/sqrt(d) passed explicitly, since
the augmented width is 2d), which torch.compile and flash kernels handle.
A finite band offers each key twice, plain and augmented, and lets a mask
pick the copy per pair (banded_reciprocal): SDPA again, in query blocks.

Cache. The reciprocal term for a new token i needs q_j of every earlier
token j, so a generation cache holds the base cache plus each token's
per-head queries: 3 * n_embd elements per token and layer over vanilla
projections (k, v, q; 2 * kv_dim + n_embd with grouped-query attention,
whose key heads are repeated for their query groups only after the cache), latent_dim + rope_dim + n_head * (head_dim +
rope_dim) over MLA. Storing q undoes much of MLA's saving; that is the
price of the reciprocal term. With a fixed alpha = 0 the plain base cache
is used.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from gpt2.attention import CausalSelfAttention, KVCache, causal_mask, same_every_layer
from gpt2.config import GPT2Config
from gpt2.mla import LatentCache, MLAttention, latent_cache_width
from gpt2.variants import variant

# Queries per SDPA call on the banded path: larger blocks mean fewer calls
# but more masked-out scores (up to a block's width per query).
_BAND_BLOCK = 128


BaseCache = TypeVar("BaseCache", KVCache, LatentCache)


@dataclass
class ReciprocalCache(Generic[BaseCache]):
    """A base cache (keys/values or MLA latents) plus every token's queries.

    q is [B, H, T_cache, Dq] or None before the first token.
    """

    base: BaseCache
    q: Tensor | None = None

    @property
    def pos(self) -> int:
        """Number of tokens cached, which is also the next token's position."""
        return self.base.pos

    def append_q(self, q: Tensor) -> Tensor:
        """Add the new tokens' queries; return the queries of every token so far."""
        self.q = q if self.q is None else torch.cat((self.q, q), dim=2)
        return self.q


def reciprocal_on(config: GPT2Config) -> bool:
    """Whether the reciprocal term runs: alpha > 0, or alpha learned."""
    return config.ra_alpha != 0 or config.ra_alpha_learned


def new_ra_cache(config: GPT2Config) -> KVCache | LatentCache | ReciprocalCache[Any]:
    """Empty cache for one RA layer; a fixed alpha = 0 needs only the base cache."""
    base = LatentCache() if variant(config.attention).latent else KVCache()
    return ReciprocalCache(base) if reciprocal_on(config) else base


def ra_cache_width(config: GPT2Config) -> int:
    """Elements one RA layer caches per token (see the module docstring)."""
    if variant(config.attention).latent:
        base = latent_cache_width(config)
        q_width = config.n_head * (config.head_dim + config.rope_dim)
    else:
        base, q_width = 2 * config.kv_dim, config.n_embd
    return base + q_width if reciprocal_on(config) else base


def ra_score_width(config: GPT2Config) -> int:
    """Width of one head's score dot product: q and k (with MLA's rotary
    part), doubled by the augmentation when the reciprocal term runs."""
    width = config.head_dim + (config.rope_dim if variant(config.attention).latent else 0)
    return 2 * width if reciprocal_on(config) else width


def _sides(alpha: float | Tensor) -> tuple[float | Tensor, float]:
    """(query-side, key-side) factors of the augmentation, whose product is
    alpha: sqrt(alpha) on each side for a fixed alpha >= 0; a learned alpha
    (a tensor broadcasting over [B, H, T, D], any sign) on the query side."""
    if isinstance(alpha, Tensor):
        return alpha, 1.0
    root = math.sqrt(alpha)
    return root, root


def reciprocal_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    q_all: Tensor,
    n_past: int,
    alpha: float | Tensor,
    window: int,
    dropout_p: float = 0.0,
) -> Tensor:
    """RA output [B, H, T, Dv] for T new queries after n_past cached tokens.

    q: [B, H, T, D] new queries; k, q_all: [B, H, S, D] keys and queries of
    all S = n_past + T tokens; v: [B, H, S, Dv]. Scale is 1/sqrt(D). alpha:
    a number, or a learned per-head tensor of shape [H, 1, 1].
    """
    if window == 0 or window >= k.size(2):
        return fused_reciprocal(q, k, v, q_all, n_past, alpha, dropout_p)
    return banded_reciprocal(q, k, v, q_all, n_past, alpha, window, dropout_p)


def fused_reciprocal(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    q_all: Tensor,
    n_past: int,
    alpha: float | Tensor,
    dropout_p: float = 0.0,
) -> Tensor:
    """Whole-context RA as one SDPA call on augmented queries and keys."""
    q_side, k_side = _sides(alpha)
    q_aug = torch.cat((q, q_side * k[:, :, n_past:]), dim=-1)
    k_aug = torch.cat((k, k_side * q_all), dim=-1)
    mask, is_causal = causal_mask(q.size(2), n_past, q.device)
    return F.scaled_dot_product_attention(
        q_aug,
        k_aug,
        v,
        attn_mask=mask,
        dropout_p=dropout_p,
        is_causal=is_causal,
        # The augmented width is 2D, but the logits are sums of D-wide products.
        scale=1.0 / math.sqrt(q.size(-1)),
    )


def banded_reciprocal(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    q_all: Tensor,
    n_past: int,
    alpha: float | Tensor,
    window: int,
    dropout_p: float = 0.0,
) -> Tensor:
    """RA with the reciprocal term limited to i - j <= window, through SDPA.

    Every key j is offered twice: plain, [k_j, 0], and augmented,
    [k_j, sqrt(alpha) q_j]. Against the query [q_i, sqrt(alpha) k_i] the
    first scores S_ij and the second S_ij + alpha S_ji. A boolean mask lets
    query i see the plain copy when i - j > window and the augmented copy
    when 0 <= i - j <= window, so each pair is counted once with the right
    logit and nothing later than i is seen. Queries go in blocks of
    _BAND_BLOCK: a block needs plain copies of the keys before its last
    query's band and augmented copies of the keys within the window of its
    queries, about T^2 / 2 + T (block + window) scores over the sequence,
    none of them kept as a T x T tensor for the backward pass.
    """
    q_side, k_side = _sides(alpha)
    n_new = q.size(2)
    q_aug = torch.cat((q, q_side * k[:, :, n_past:]), dim=-1)
    plain = torch.cat((k, torch.zeros_like(k)), dim=-1)
    recip = torch.cat((k, k_side * q_all), dim=-1)
    outs = []
    for start in range(0, n_new, _BAND_BLOCK):
        stop = min(start + _BAND_BLOCK, n_new)
        first, last = n_past + start, n_past + stop - 1  # absolute positions of the queries
        far, near = max(0, last - window), max(0, first - window)
        keys = torch.cat((plain[:, :, :far], recip[:, :, near : last + 1]), dim=2)
        values = torch.cat((v[:, :, :far], v[:, :, near : last + 1]), dim=2)
        rows = torch.arange(first, last + 1, device=q.device).unsqueeze(1)
        cols = torch.cat(
            (torch.arange(far, device=q.device), torch.arange(near, last + 1, device=q.device))
        )
        lag = rows - cols  # i - j
        in_band = (lag >= 0) & (lag <= window)
        allowed = torch.where(
            torch.arange(cols.numel(), device=q.device) < far, lag > window, in_band
        )
        outs.append(
            F.scaled_dot_product_attention(
                q_aug[:, :, start:stop],
                keys,
                values,
                attn_mask=allowed,
                dropout_p=dropout_p,
                scale=1.0 / math.sqrt(q.size(-1)),
            )
        )
    return torch.cat(outs, dim=2)


def _attend(
    module: CausalSelfAttention | MLAttention,
    q: Tensor,
    k: Tensor,
    v: Tensor,
    n_past: int,
    cache: ReciprocalCache[Any] | None,
) -> Tensor:
    """Store the new queries in the cache, then run RA for them."""
    q_all = q if cache is None else cache.append_q(q)
    alpha = module.alpha
    if module.ra_alpha is not None:  # learned: [H] -> [H, 1, 1], in q's dtype under autocast
        alpha = module.ra_alpha.view(-1, 1, 1).to(q.dtype)
    return reciprocal_attention(
        q,
        k,
        v,
        q_all,
        n_past,
        alpha,
        module.window,
        dropout_p=module.dropout if module.training else 0.0,
    )


def _set_alpha(module: nn.Module, config: GPT2Config) -> None:
    """module.alpha, the fixed alpha (0.0 when learned), and module.ra_alpha,
    the learned per-head alpha or None."""
    module.window = config.ra_window
    module.alpha = 0.0 if config.ra_alpha_learned else float(config.ra_alpha)
    module.ra_alpha = (
        nn.Parameter(torch.full((config.n_head,), float(config.ra_alpha)))
        if config.ra_alpha_learned
        else None
    )


# new_ra_cache gives each layer the cache that matches _base_only
BASE_CACHE = "a fixed alpha of 0 caches like the base attention (new_ra_cache)"
QUERY_CACHE = "reciprocal attention caches every token's queries (new_ra_cache)"


def _base_only(module: nn.Module) -> bool:
    """A fixed alpha of 0: the base attention, bit for bit, with its cache."""
    return module.alpha == 0 and module.ra_alpha is None


class ReciprocalSelfAttention(CausalSelfAttention):
    """RA over GPT-2's projections; same module names as the vanilla layer,
    so a vanilla state dict loads into it."""

    def __init__(self, config: GPT2Config) -> None:
        super().__init__(config)
        _set_alpha(self, config)

    def forward(self, x: Tensor, cache: ReciprocalCache[KVCache] | KVCache | None = None) -> Tensor:
        """x: [B, T, C]. With a cache, x holds only the tokens after it."""
        if _base_only(self):
            assert not isinstance(cache, ReciprocalCache), BASE_CACHE
            return super().forward(x, cache)
        assert not isinstance(cache, KVCache), QUERY_CACHE
        batch, n_new, width = x.shape
        n_past = 0 if cache is None else cache.pos
        q, k, v = self.qkv(x, n_past)
        if cache is not None:
            k, v = cache.base.append(k, v)
        # The augmented keys [k_j, q_j] pair each query head with a key head.
        y = _attend(self, q, self.expand_kv(k), self.expand_kv(v), n_past, cache)
        y = y.transpose(1, 2).contiguous().view(batch, n_new, width)
        return self.resid_dropout(self.c_proj(y))


class ReciprocalMLA(MLAttention):
    """RA over MLA's queries and keys (content and RoPE parts together);
    same module names as MLAttention."""

    def __init__(self, config: GPT2Config) -> None:
        super().__init__(config)
        _set_alpha(self, config)

    def forward(
        self, x: Tensor, cache: ReciprocalCache[LatentCache] | LatentCache | None = None
    ) -> Tensor:
        """x: [B, T, C]. With a cache, x holds only the tokens after it."""
        if _base_only(self):
            assert not isinstance(cache, ReciprocalCache), BASE_CACHE
            return super().forward(x, cache)
        assert not isinstance(cache, LatentCache), QUERY_CACHE
        base = None if cache is None else cache.base
        q, k, v, n_past = self.project(x, base)
        return self.output(_attend(self, q, k, v, n_past, cache))


RA_LOGIT = same_every_layer(ReciprocalSelfAttention, new_ra_cache, ra_cache_width, ra_score_width)
RA_MLA = same_every_layer(ReciprocalMLA, new_ra_cache, ra_cache_width, ra_score_width)
