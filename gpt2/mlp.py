"""The block's feed-forward layer: GPT-2's GELU MLP or SwiGLU.

SwiGLU (Shazeer 2020, "GLU Variants Improve Transformer", arXiv 2002.05202):
c_proj(silu(c_gate(x)) * c_fc(x)), three matrices instead of two. To keep
the parameters of the 4x GELU MLP (8 C^2), the hidden width is 2/3 of 4 C,
rounded up to a multiple of 64 (LLaMA's rule, Touvron et al. 2023, with
its multiple_of 256 lowered to 64 so small models stay near 8 C^2): C = 768
gives 2048 (exactly 8 C^2), C = 128 gives 384 (+12.5 %). The rounding adds
at most 3 * C * 63 parameters per block.
"""

from __future__ import annotations

from typing import Protocol

import torch.nn.functional as F
from torch import Tensor, nn

# swiglu_hidden lives with the config, which the estimate imports without torch
from gpt2.config import SWIGLU_MULTIPLE as SWIGLU_MULTIPLE
from gpt2.config import swiglu_hidden


class MLPConfig(Protocol):
    """The fields MLP reads: GPT2Config's and HAMTConfig's (HAMT's blocks share it)."""

    n_embd: int
    bias: bool
    dropout: float


class SwiGLUConfig(MLPConfig, Protocol):
    mlp: str
    gelu: str


class MLP(nn.Module):
    """Position-wise feed-forward layer, four times as wide as the stream.
    gelu: "tanh", the approximation GPT-2 was trained with (the exact form
    would shift pretrained activations slightly), or "exact" (erf), as
    nanoGPT and knlp (GPT2Config.gelu, GPT2_GELU)."""

    def __init__(self, config: MLPConfig, gelu: str = "tanh") -> None:
        super().__init__()
        self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd, bias=config.bias)
        self.gelu = nn.GELU(approximate={"tanh": "tanh", "exact": "none"}[gelu])
        self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd, bias=config.bias)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class SwiGLU(nn.Module):
    """c_proj(silu(c_gate(x)) * c_fc(x)); c_proj keeps its name so the
    residual initialisation (lib/model/interface.py init_weights) finds it."""

    def __init__(self, config: MLPConfig) -> None:
        super().__init__()
        hidden = swiglu_hidden(config.n_embd)
        self.c_fc = nn.Linear(config.n_embd, hidden, bias=config.bias)
        self.c_gate = nn.Linear(config.n_embd, hidden, bias=config.bias)
        self.c_proj = nn.Linear(hidden, config.n_embd, bias=config.bias)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.dropout(self.c_proj(F.silu(self.c_gate(x)) * self.c_fc(x)))


def make_mlp(config: SwiGLUConfig) -> nn.Module:
    return SwiGLU(config) if config.mlp == "swiglu" else MLP(config, config.gelu)
