"""Sliding-window perplexity: every token scored once, with up to a block of context.

A text of n tokens is cut into windows that start every `stride` tokens. The
window starting at b feeds tokens[b:e] (e = min(b + block, n - 1)) and its
logits predict tokens[b + 1:e + 1]; only the predictions no earlier window
made are counted. So every token but the first is scored exactly once, and
past the first window each scored token sees at least block - stride + 1
tokens of context. stride = block gives disjoint windows (cheapest, least
context); stride = 1 gives every token the whole block (slowest). Half the
block is the usual compromise (Hugging Face's perplexity guide uses 512 for
GPT-2's 1024).
"""
from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn


@dataclass(frozen=True)
class Window:
    begin: int  # first input token
    end: int  # one past the last input token; targets are tokens[begin + 1:end + 1]
    first: int  # index of the first target token this window scores


@dataclass(frozen=True)
class Perplexity:
    """Summed negative log-likelihood (nats) over the scored tokens."""

    nll: float
    tokens: int
    windows: int
    context: int
    stride: int

    @property
    def loss(self) -> float:
        return self.nll / self.tokens

    @property
    def perplexity(self) -> float:
        return math.exp(min(self.loss, 700.0))

    def as_dict(self) -> dict[str, Any]:
        return {"loss": self.loss, "perplexity": self.perplexity, "nll": self.nll,
                "tokens": self.tokens, "windows": self.windows, "context": self.context,
                "stride": self.stride}


def plan_windows(n: int, block: int, stride: int) -> list[Window]:
    """The windows that score tokens 1..n-1 of an n-token text, in order."""
    if n < 2:
        raise ValueError(f"a text of {n} token(s) has nothing to score: it needs at least 2")
    if not 1 <= stride <= block:
        raise ValueError(f"stride {stride} is invalid: it must be from 1 to the context "
                         f"length {block} (a larger stride would leave tokens unscored)")
    windows: list[Window] = []
    scored = 0  # the last target index scored so far; token 0 never is
    begin = 0
    while scored < n - 1:
        end = min(begin + block, n - 1)
        windows.append(Window(begin, end, scored + 1))
        scored = end
        begin += stride
    return windows


def _batches(windows: list[Window], batch_size: int) -> list[list[Window]]:
    """Groups of equal-length windows (all but the last window are full)."""
    groups: list[list[Window]] = []
    for w in windows:
        last = groups[-1] if groups else None
        if (last is not None and len(last) < batch_size
                and last[0].end - last[0].begin == w.end - w.begin):
            last.append(w)
        else:
            groups.append([w])
    return groups


@torch.no_grad()
def sliding_window_nll(model: nn.Module, tokens: Tensor, block: int, stride: int,
                       batch_size: int = 8, device: torch.device | str = "cpu",
                       autocast: contextlib.AbstractContextManager | None = None) -> Perplexity:
    """Perplexity of model on a 1-D tensor of token ids.

    model follows the project's interface: model(idx, targets) -> (logits
    [B, T, V], loss); targets of -1 are ignored. Only the scored positions'
    logits are turned into log-probabilities (in fp32), so memory stays near
    one batch of logits. The caller puts the model in eval mode.
    """
    tokens = tokens.to(torch.long).flatten()
    windows = plan_windows(tokens.numel(), block, stride)
    nll = 0.0
    for group in _batches(windows, batch_size):
        x = torch.stack([tokens[w.begin:w.end] for w in group])
        y = torch.stack([tokens[w.begin + 1:w.end + 1] for w in group]).clone()
        for row, w in enumerate(group):
            y[row, :w.first - w.begin - 1] = -1  # already scored by an earlier window
        x, y = x.to(device), y.to(device)
        with autocast or contextlib.nullcontext():
            logits, _ = model(x, y)
        keep = y >= 0
        nll += F.cross_entropy(logits[keep].float(), y[keep], reduction="sum").item()
    return Perplexity(nll, tokens.numel() - 1, len(windows), block, stride)
