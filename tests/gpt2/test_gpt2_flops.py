"""flops_per_token per attention variant, against counts done by hand.

The 2-layer, 4-head, 64-wide debug model (head_dim Q = 16) at T = 32:
attention adds 6 * L * H * T * (w_qk + w_v) = 1536 * (w_qk + w_v).
Per block every variant has two LayerNorms (256) and the MLP
(c_fc 64*256+256 = 16640, c_proj 256*64+64 = 16448); outside the blocks
wte 101*64 = 6464 and ln_f 128.
"""

from __future__ import annotations

from typing import Any

import pytest

from gpt2.config import GPT2Config
from gpt2.model import GPT2

TINY = dict(vocab_size=101, block_size=32, n_layer=2, n_head=4, n_embd=64)
SHARED = 2 * (256 + 16640 + 16448) + 6464 + 128  # 73,280
ATTENTION_UNIT = 6 * 2 * 4 * 32  # 6 L H T


def _flops(**overrides: Any) -> tuple[int, int]:
    model = GPT2(GPT2Config(**{**TINY, **overrides}))
    return model.num_params(non_embedding=True), model.flops_per_token(32)


@pytest.mark.parametrize(
    ("overrides", "attn_params", "qk_width"),
    [
        # c_attn 64*192+192 + c_proj 64*64+64; scores and sums both 16 wide.
        ({}, 12480 + 4160, 16),
        # kv_down 64*16+16, k_up and v_up 16*64+64 each, q_proj and c_proj 64*64+64.
        (dict(attention="mla", latent_dim=16), 1040 + 2 * 1088 + 2 * 4160, 16),
        # + q_down 1040, q_up 1088 instead of q_proj; q_rope 16*32+32, k_rope 64*8+8;
        # scores are 16 + 8 wide.
        (
            dict(attention="mla", latent_dim=16, rope_dim=8, q_latent=True),
            1040 + 2 * 1088 + 1040 + 1088 + 544 + 520 + 4160,
            24,
        ),
        # RA: vanilla weights, augmented scores [q, sqrt(a) k] . [k, sqrt(a) q] 32 wide,
        # the same with a band.
        (dict(attention="ra_logit", ra_alpha=0.5), 12480 + 4160, 32),
        (dict(attention="ra_logit", ra_alpha=0.5, ra_window=3), 12480 + 4160, 32),
        # alpha = 0 is vanilla attention ...
        (dict(attention="ra_logit", ra_alpha=0.0, ra_window=3), 12480 + 4160, 16),
        # ... unless learned: 4 alphas (one per head), and the augmented scores from the start.
        (dict(attention="ra_logit", ra_alpha=0.0, ra_alpha_learned=True), 12480 + 4160 + 4, 32),
        # SDPA output gate: one more 64 x 64 Linear (+ bias); the gating itself is elementwise.
        (dict(attention="sdpa_gate"), 12480 + 4160 + 4160, 16),
        # RA+MLA with rope 8: q_rope from h (64*32+32), scores 2 * (16 + 8) wide.
        (
            dict(attention="ra_mla", ra_alpha=0.5, latent_dim=16, rope_dim=8),
            1040 + 2 * 1088 + 4160 + 2080 + 520 + 4160,
            48,
        ),
    ],
)
def test_flops_per_token_of_each_attention_variant(
    overrides: dict[str, Any], attn_params: int, qk_width: int
) -> None:
    params, flops = _flops(**overrides)
    assert params == SHARED + 2 * attn_params
    assert flops == 6 * params + ATTENTION_UNIT * (qk_width + 16)


def test_known_totals() -> None:
    # Written out once, so a change to the shared constants above cannot hide an error.
    assert _flops() == (106_560, 688_512)
    assert _flops(attention="ra_logit", ra_alpha=0.5) == (106_560, 713_088)
    assert _flops(attention="mla", latent_dim=16, rope_dim=8, q_latent=True) == (94_416, 627_936)
    assert _flops(attention="ra_mla", ra_alpha=0.5, latent_dim=16, rope_dim=8) == (101_552, 707_616)


def test_flops_per_token_of_gated_ra_counts_reverse_heads_on_reverse_layers_only() -> None:
    # 1 reverse layer of 2 (n_layer // 2 - 1 // 2 = layer 1), 2 reverse heads of 4.
    params, flops = _flops(attention="ra_gated", ra_gated_layers=1, ra_gated_heads=2)
    # Layer 0 vanilla; layer 1 adds ra_gate (1), ra_proj 32*64+64 and ra_norm 64+64.
    assert params == SHARED + 2 * (12480 + 4160) + 1 + 2112 + 128 == 108_801
    # Per token and key: layer 0's 4 heads x (16 + 16), layer 1's 4 + 2 heads x (16 + 16).
    assert flops == 6 * params + 6 * 32 * (4 * 32 + 6 * 32) == 714_246


def test_flops_per_token_of_both_gates_adds_the_output_gates_weights_only() -> None:
    # Gated RA as above plus a 64 x 64 output gate (+ bias) on each of the 2 layers.
    params, flops = _flops(attention="sdpa_gate_ra_gated", ra_gated_layers=1, ra_gated_heads=2)
    assert params == 108_801 + 2 * 4160 == 117_121
    assert flops == 6 * params + 6 * 32 * (4 * 32 + 6 * 32) == 764_166
