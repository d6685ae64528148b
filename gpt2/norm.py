"""The block's normalisation: GPT-2's LayerNorm or RMSNorm (Zhang & Sennrich
2019, "Root Mean Square Layer Normalization", arXiv 1910.07467), and the
per-head RMSNorm of QK-norm.

RMSNorm drops LayerNorm's mean subtraction and bias: x / rms(x) * g. It is
torch.nn.RMSNorm with a learned gain, as LLaMA's. QK-norm (Dehghani et al.
2023, ViT-22B; OLMo-2, Team OLMo 2024; modded-nanogpt) normalises each
head's query and key before their dot product, so the logits cannot grow
without bound; here one gain of head_dim shared by the heads, as OLMo-2's
per-head variant, applied before RoPE.
"""

from __future__ import annotations

from typing import Protocol

from torch import Tensor, nn


class NormConfig(Protocol):
    """The fields make_norm reads (GPT2Config's)."""

    norm: str
    norm_eps: float
    bias: bool


def make_norm(config: NormConfig, width: int) -> nn.Module:
    """LayerNorm (bias as config.bias) or RMSNorm over `width` features."""
    if config.norm == "rmsnorm":
        return nn.RMSNorm(width, eps=config.norm_eps)
    return nn.LayerNorm(width, eps=config.norm_eps, bias=config.bias)


def head_norm(config: NormConfig, head_dim: int) -> nn.RMSNorm:
    """QK-norm's RMSNorm over one head's features (gain shared by all heads)."""
    return nn.RMSNorm(head_dim, eps=config.norm_eps)


def normed(norm: nn.RMSNorm, t: Tensor) -> Tensor:
    """norm(t) in the gain's dtype, returned in t's: under autocast q and k are
    16-bit while the gain is fp32, and torch's fused RMSNorm kernel needs
    both in one dtype (else it warns and falls back to the composite)."""
    assert norm.weight is not None  # head_norm's gain (elementwise_affine)
    return norm(t.to(norm.weight.dtype)).to(t.dtype)
