"""Causal multi-head self-attention with an optional key/value cache.

The cache lets generation feed one new token per step: keys and values of
earlier tokens never change (attention is causal), so recomputing them for
every generated token would repeat work that grows with the context.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from gpt2.config import GPT2Config


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
        self.dropout = config.dropout
        # One matrix for q, k and v: a single larger matmul is faster than
        # three, and it matches the layout of GPT-2's published weights.
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.resid_dropout = nn.Dropout(config.dropout)

    def forward(self, x: Tensor, cache: KVCache | None = None) -> Tensor:
        """x: [B, T, C]. With a cache, x holds only the tokens after it."""
        return self.resid_dropout(self.c_proj(self.heads_output(x, cache)))

    def heads_output(self, x: Tensor, cache: KVCache | None = None) -> Tensor:
        """The heads' outputs, merged to [B, T, C], before the output projection."""
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        q, k, v = (self._split_heads(t) for t in (q, k, v))
        n_past = 0
        if cache is not None:
            n_past = cache.pos
            k, v = cache.append(k, v)
        return merge_heads(self.attend(q, k, v, n_past))

    def attend(self, q: Tensor, k: Tensor, v: Tensor, n_past: int) -> Tensor:
        """Causal SDPA of the new queries q over all keys k and values v."""
        mask, is_causal = causal_mask(q.size(2), n_past, q.device)
        return F.scaled_dot_product_attention(
            q,
            k,
            v,
            attn_mask=mask,
            # Attention dropout is a training regulariser only.
            dropout_p=self.dropout if self.training else 0.0,
            is_causal=is_causal,
        )

    def _split_heads(self, t: Tensor) -> Tensor:
        """[B, T, C] -> [B, H, T, D]."""
        batch, seq, width = t.shape
        return t.view(batch, seq, self.n_head, width // self.n_head).transpose(1, 2)


def merge_heads(y: Tensor) -> Tensor:
    """[B, H, T, D] -> [B, T, H * D]."""
    batch, heads, seq, width = y.shape
    return y.transpose(1, 2).contiguous().view(batch, seq, heads * width)
