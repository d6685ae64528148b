"""Rotary position embedding (RoPE, Su et al. 2021, "RoFormer", arXiv 2104.09864).

One implementation for both users: whole query/key heads of the vanilla-style
attentions when config.position is "rope" (gpt2/attention.py), and MLA's
decoupled rotary part (gpt2/mla.py). A pair of coordinates (i, i + R/2) of a
vector at position p is rotated by the angle p * theta^(-i / (R/2)), so the
dot product of a rotated query and key depends only on their distance.
"""

from __future__ import annotations

import torch
from torch import Tensor

ROPE_BASE = 10000.0  # RoFormer's frequency base theta, and GPT2Config.rope_theta's default


def rotary(x: Tensor, start: int, base: float = ROPE_BASE, seq_dim: int = -2) -> Tensor:
    """RoPE on the last dim of x [..., T, R] (or [..., T, H, R] with seq_dim
    -3) for absolute positions start.. start+T-1.

    Pairs coordinate i with i + R/2 (the "rotate half" layout). Positions
    are absolute so that a token rotated during prefill and one rotated
    alone during generation get the same angle. Angles are computed in
    float32, or in float64 for a float64 x: float32 angles at position
    1000 are off by up to 2e-5 rad, far above a float64 model's precision
    (16-bit x still gets float32 angles, cast after cos and sin).
    """
    half = x.size(-1) // 2
    dtype = torch.promote_types(x.dtype, torch.float32)
    inv_freq = base ** (-torch.arange(half, dtype=dtype, device=x.device) / half)
    pos = torch.arange(start, start + x.size(seq_dim), dtype=dtype, device=x.device)
    angles = torch.outer(pos, inv_freq)
    if seq_dim == -3:  # one angle per position for all heads
        angles = angles.unsqueeze(-2)
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)
