"""Gated attention output (Qiu et al. 2025, "Gated Attention for Large Language
Models", arXiv 2505.06708): the control the original project measured its
reciprocal attention against (knlp gpt2/model_knlp.py, GPT2_KNLP_SDPA_GATE).

The heads' merged output is multiplied element by element by a sigmoid gate
computed from the attention's input (the block's ln_1 output), before the
output projection:

    y = c_proj(SDPA(q, k, v) * sigmoid(W_g x + b_g))

W_g is n_embd x n_embd (the paper's elementwise G1 position; its head-wise
variant, one scalar per head, is not offered). Initialised like every
Linear, N(0, 0.02) with a zero bias, so the gate starts near 0.5 and the
output at about half of vanilla's. The gate depends only on the token's own
input, so causality and the generation cache are vanilla attention's.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from gpt2.attention import CausalSelfAttention, KVCache, kv_cache_width, same_every_layer
from gpt2.config import GPT2Config


class OutputGatedAttention(CausalSelfAttention):
    """Vanilla attention with a sigmoid gate on the heads' output; a vanilla
    state dict loads into it except for the gate (output_gate)."""

    def __init__(self, config: GPT2Config) -> None:
        super().__init__(config)
        self.output_gate = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)

    def forward(self, x: Tensor, cache: KVCache | None = None) -> Tensor:
        """x: [B, T, C]. With a cache, x holds only the tokens after it."""
        y = self.heads_output(x, cache) * torch.sigmoid(self.output_gate(x))
        return self.resid_dropout(self.c_proj(y))


SDPA_GATE = same_every_layer(
    OutputGatedAttention, lambda c: KVCache(), kv_cache_width, lambda c: c.head_dim
)
