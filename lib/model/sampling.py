"""Choosing the next token from logits, shared by every model family's generate()."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor


def check_sampling(temperature: float, top_k: int | None) -> None:
    if temperature < 0:
        raise ValueError(f"temperature={temperature} is invalid: it must be >= 0")
    if top_k is not None and top_k < 1:
        raise ValueError(f"top_k={top_k} is invalid: it must be >= 1 or None")


def sample_token(logits: Tensor, temperature: float, top_k: int | None) -> Tensor:
    """One token per row of logits [B, V], as [B, 1]; temperature 0 is greedy."""
    if temperature == 0:
        return logits.argmax(dim=-1, keepdim=True)
    logits = logits / temperature
    if top_k is not None:
        kth = torch.topk(logits, min(top_k, logits.size(-1))).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    return torch.multinomial(F.softmax(logits, dim=-1), num_samples=1)
