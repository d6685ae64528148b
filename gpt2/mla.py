"""Multi-head latent attention (MLA, DeepSeek-V2 section 2.1).

Keys and values are not projected from the hidden state h directly but from
a narrow latent c_KV = W_DKV h (latent_dim wide): k_C = W_UK c_KV and
v = W_UV c_KV. Only c_KV has to be cached during generation, which is where
MLA saves memory: latent_dim (+ rope_dim) elements per token and layer
instead of vanilla attention's 2 * n_embd.

Position information: GPT-2 adds learned position embeddings to the input,
so MLA works without rotary embeddings (rope_dim = 0). With rope_dim > 0 the
paper's decoupled RoPE is added: each head gets an extra rotated query part
q_R, and one rotated key part k_R = RoPE(W_KR h) is shared by all heads and
cached next to c_KV. RoPE cannot be applied to k_C itself, because the
rotation depends on the position and would have to be redone for every
cached token.

With config.position "rope" the model has no learned position table and
the decoupled RoPE (rope_dim > 0, frequency base rope_theta) is MLA's only
position signal. QK-norm (qk_norm) normalises each head's content query
and key q_C, k_C (not the rotary parts: the rotary key is one vector
shared by all heads), before the rotary parts are joined.

Generation reconstructs every cached token's keys and values from the
cached latents at each step. The paper's "absorbed" form (folding W_UK
into the query and W_UV into the output projection so attention runs in
latent space) is not done: it saves compute, not cache, and this form is
simpler to check against the full forward.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from gpt2.attention import causal_mask, same_every_layer
from gpt2.config import GPT2Config
from gpt2.norm import head_norm, normed

# ROPE_BASE and rotary are re-exported: MLA's RoPE is the model's one implementation
from gpt2.rope import ROPE_BASE as ROPE_BASE
from gpt2.rope import rotary


@dataclass
class LatentCache:
    """What one MLA layer keeps per generated token.

    c_kv is [B, T_cache, latent_dim]; k_rope is [B, T_cache, rope_dim],
    already rotated at its absolute position, or None when rope_dim is 0.
    """

    c_kv: Tensor | None = None
    k_rope: Tensor | None = None

    @property
    def pos(self) -> int:
        """Number of tokens cached, which is also the next token's position."""
        return 0 if self.c_kv is None else self.c_kv.size(1)

    def append(self, c_kv: Tensor, k_rope: Tensor | None) -> tuple[Tensor, Tensor | None]:
        """Add the new tokens' latents; return those of every token so far."""
        if self.c_kv is None:
            self.c_kv, self.k_rope = c_kv, k_rope
        else:
            self.c_kv = torch.cat((self.c_kv, c_kv), dim=1)
            if k_rope is not None and self.k_rope is not None:
                self.k_rope = torch.cat((self.k_rope, k_rope), dim=1)
        return self.c_kv, self.k_rope


def latent_cache_width(config: GPT2Config) -> int:
    """Elements one MLA layer caches per token."""
    return config.latent_dim + config.rope_dim


class MLAttention(nn.Module):
    """Multi-head latent attention with optional low-rank queries and RoPE.

    Linear layers: kv_down (W_DKV), k_up (W_UK), v_up (W_UV); queries from
    q_proj, or q_down (W_DQ) and q_up (W_UQ) when config.q_latent; with
    rope_dim > 0 also q_rope (W_QR) and k_rope (W_KR); c_proj is the output
    projection, named as in vanilla attention so the residual init finds it.
    """

    def __init__(self, config: GPT2Config) -> None:
        super().__init__()
        self.n_head = config.n_head
        self.head_dim = config.head_dim
        self.rope_dim = config.rope_dim
        self.rope_theta = config.rope_theta
        self.dropout = config.dropout
        self.q_latent = config.q_latent
        self.v_shared = not config.v_up_per_head
        width, latent, bias = config.n_embd, config.latent_dim, config.bias
        self.kv_down = nn.Linear(width, latent, bias=bias)
        self.k_up = nn.Linear(latent, width, bias=bias)
        # A shared value projection is head_dim wide and read by every head.
        v_width = width if config.v_up_per_head else config.head_dim
        self.v_up = nn.Linear(latent, v_width, bias=bias)
        if config.q_latent:
            self.q_down = nn.Linear(width, latent, bias=bias)
            self.q_up = nn.Linear(latent, width, bias=bias)
        else:
            self.q_proj = nn.Linear(width, width, bias=bias)
        if config.rope_dim:
            q_source = latent if config.q_latent else width
            self.q_rope = nn.Linear(q_source, config.n_head * config.rope_dim, bias=bias)
            self.k_rope = nn.Linear(width, config.rope_dim, bias=bias)
        self.c_proj = nn.Linear(width, width, bias=bias)
        self.resid_dropout = nn.Dropout(config.dropout)
        self.q_norm = head_norm(config, config.head_dim) if config.qk_norm else None
        self.k_norm = head_norm(config, config.head_dim) if config.qk_norm else None

    def forward(self, x: Tensor, cache: LatentCache | None = None) -> Tensor:
        """x: [B, T, C]. With a cache, x holds only the tokens after it."""
        q, k, v, n_past = self.project(x, cache)
        mask, is_causal = causal_mask(x.size(1), n_past, x.device)
        y = F.scaled_dot_product_attention(
            q,
            k,
            v,
            attn_mask=mask,
            dropout_p=self.dropout if self.training else 0.0,
            is_causal=is_causal,
            # q and k are head_dim + rope_dim wide: the paper's 1/sqrt(d_h + d_R).
            scale=1.0 / math.sqrt(q.size(-1)),
        )
        return self.output(y)

    def project(self, x: Tensor, cache: LatentCache | None) -> tuple[Tensor, Tensor, Tensor, int]:
        """Queries [B, H, T, Dq] of the new tokens; keys [B, H, S, Dq] and
        values [B, H, S, head_dim] of all S cached + new tokens; the number
        of cached tokens before x (Dq = head_dim + rope_dim)."""
        n_past = 0 if cache is None else cache.pos
        c_kv = self.kv_down(x)
        k_rope = rotary(self.k_rope(x), n_past, self.rope_theta) if self.rope_dim else None
        if cache is not None:
            c_kv, k_rope = cache.append(c_kv, k_rope)
        q = self._queries(x, n_past)
        k = self._split_heads(self.k_up(c_kv))
        if self.k_norm is not None:
            k = normed(self.k_norm, k)
        if k_rope is not None:
            # One rotary key per token, the same for every head.
            shared = k_rope.unsqueeze(1).expand(-1, self.n_head, -1, -1)
            k = torch.cat((k, shared), dim=-1)
        v = self.v_up(c_kv)
        if self.v_shared:
            v = v.unsqueeze(1).expand(-1, self.n_head, -1, -1)
        else:
            v = self._split_heads(v)
        return q, k, v, n_past

    def output(self, y: Tensor) -> Tensor:
        """Per-head outputs [B, H, T, head_dim] -> projected [B, T, C]."""
        batch, _, seq, _ = y.shape
        y = y.transpose(1, 2).reshape(batch, seq, self.n_head * self.head_dim)
        return self.resid_dropout(self.c_proj(y))

    def _queries(self, x: Tensor, n_past: int) -> Tensor:
        """[B, H, T, head_dim + rope_dim] queries for the new tokens."""
        if self.q_latent:
            source = self.q_down(x)
            q = self._split_heads(self.q_up(source))
        else:
            source = x
            q = self._split_heads(self.q_proj(source))
        if self.q_norm is not None:
            q = normed(self.q_norm, q)
        if not self.rope_dim:
            return q
        q_rope = rotary(self._split_heads(self.q_rope(source)), n_past, self.rope_theta)
        return torch.cat((q, q_rope), dim=-1)

    def _split_heads(self, t: Tensor) -> Tensor:
        """[B, T, H * D] -> [B, H, T, D]."""
        batch, seq, width = t.shape
        return t.view(batch, seq, self.n_head, width // self.n_head).transpose(1, 2)


MLA = same_every_layer(
    MLAttention, lambda c: LatentCache(), latent_cache_width, lambda c: c.head_dim + c.rope_dim
)
