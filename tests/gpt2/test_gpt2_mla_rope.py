"""MLA's decoupled RoPE in a float64 model: angles computed in float64."""

from __future__ import annotations

import math

import torch

from gpt2.config import GPT2Config
from gpt2.mla import ROPE_BASE, LatentCache, rotary
from gpt2.model import GPT2


def rotated_by_hand(x: torch.Tensor, start: int) -> torch.Tensor:
    """Rotate-half RoPE of x [T, R] at positions start.., angles from math.cos/sin."""
    half = x.size(1) // 2
    out = torch.empty_like(x)
    for t in range(x.size(0)):
        for i in range(half):
            angle = (start + t) * ROPE_BASE ** (-i / half)
            c, s = math.cos(angle), math.sin(angle)
            a, b = x[t, i].item(), x[t, i + half].item()
            out[t, i], out[t, i + half] = a * c - b * s, a * s + b * c
    return out


def test_rotary_of_float64_input_uses_float64_angles() -> None:
    x = torch.randn(3, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    # float32 angles at position 4000 are off by up to 7e-5 rad (the old code: ~1e-5 here).
    torch.testing.assert_close(rotary(x, 4000), rotated_by_hand(x, 4000), rtol=0, atol=1e-12)


def test_float64_mla_model_rotates_its_cached_keys_exactly() -> None:
    torch.manual_seed(0)
    cfg = GPT2Config(
        vocab_size=50,
        block_size=2048,
        n_layer=1,
        n_head=2,
        n_embd=32,
        attention="mla",
        latent_dim=16,
        rope_dim=8,
    )
    attn = GPT2(cfg).double().transformer.h[0].attn
    x = torch.randn(1, 3, 32, dtype=torch.float64)
    # Tokens 1500..1502 after a cache of 1500 (the cached values do not matter here).
    cache = LatentCache(
        torch.zeros(1, 1500, 16, dtype=torch.float64), torch.zeros(1, 1500, 8, dtype=torch.float64)
    )
    with torch.no_grad():
        q, k, _, n_past = attn.project(x, cache)
        want_k = rotated_by_hand(attn.k_rope(x)[0], 1500)
        want_q = rotated_by_hand(attn.q_rope(x)[0, :, 8:16], 1500)  # head 1's rotary query
    assert n_past == 1500
    torch.testing.assert_close(k[0, 0, 1500:, 16:], want_k, rtol=0, atol=1e-12)
    torch.testing.assert_close(q[0, 1, :, 16:], want_q, rtol=0, atol=1e-12)
