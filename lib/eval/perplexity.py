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

Cost: one pass of each window through the blocks, then the LM head and its
softmax over the scored positions only, a few rows at a time. The head is
most of a small model's work (tiny GPT-2: 128 x 50304 = 6.4M multiply-adds
per token, its blocks 0.8M), and a batch's whole [batch, block, vocabulary]
logits are hundreds of MB, allocated and page-faulted in anew for every
batch. A family whose model offers hidden_states(idx)
(lib/model/interface.py) gets this path; any other is scored through
forward(idx, targets), logits and all.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from tqdm import tqdm


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
        return {
            "loss": self.loss,
            "perplexity": self.perplexity,
            "nll": self.nll,
            "tokens": self.tokens,
            "windows": self.windows,
            "context": self.context,
            "stride": self.stride,
        }


def plan_windows(n: int, block: int, stride: int) -> list[Window]:
    """The windows that score tokens 1..n-1 of an n-token text, in order."""
    if n < 2:
        raise ValueError(f"a text of {n} token(s) has nothing to score: it needs at least 2")
    if not 1 <= stride <= block:
        raise ValueError(
            f"stride {stride} is invalid: it must be from 1 to the context "
            f"length {block} (a larger stride would leave tokens unscored)"
        )
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
        if (
            last is not None
            and len(last) < batch_size
            and last[0].end - last[0].begin == w.end - w.begin
        ):
            last.append(w)
        else:
            groups.append([w])
    return groups


# Logits computed at once when scoring hidden states: on a CPU a chunk stays
# within the allocator's reused heap (8 MiB of fp32), where larger temporaries
# are fresh pages, faulted in anew for every batch; an accelerator takes more.
LOGITS_PER_CHUNK = {"cpu": 1 << 21}
LOGITS_PER_CHUNK_ACCELERATOR = 1 << 26


def _scored(group: list[Window], tokens: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """(row, column, target) of every prediction the group's windows score."""
    rows, cols, targets = [], [], []
    for row, w in enumerate(group):
        first = w.first - w.begin - 1  # the column whose logits predict tokens[w.first]
        cols.append(torch.arange(first, w.end - w.begin))
        rows.append(torch.full((w.end - w.begin - first,), row))
        targets.append(tokens[w.first : w.end + 1])
    return torch.cat(rows), torch.cat(cols), torch.cat(targets)


def _nll_from_hidden(
    model: nn.Module, x: Tensor, rows: Tensor, cols: Tensor, targets: Tensor
) -> Tensor:
    """Summed NLL of the scored positions: blocks over all of x, head over the rows."""
    hidden = model.hidden_states(x)[rows, cols]  # [K, C]
    head = model.lm_head
    chunk = max(
        1, LOGITS_PER_CHUNK.get(x.device.type, LOGITS_PER_CHUNK_ACCELERATOR) // head.weight.size(0)
    )
    total = hidden.new_zeros((), dtype=torch.float32)
    for i in range(0, hidden.size(0), chunk):
        logits = head(hidden[i : i + chunk])
        total += F.cross_entropy(logits.float(), targets[i : i + chunk], reduction="sum")
    return total


def _nll_from_forward(
    model: nn.Module, x: Tensor, rows: Tensor, cols: Tensor, targets: Tensor
) -> Tensor:
    """The same through forward(idx, targets): whatever logits the model makes."""
    y = torch.full_like(x, -1)
    y[rows, cols] = targets
    logits, _ = model(x, y)
    return F.cross_entropy(logits[rows, cols].float(), targets, reduction="sum")


@torch.no_grad()
def sliding_window_nll(
    model: nn.Module,
    tokens: Tensor,
    block: int,
    stride: int,
    batch_size: int = 8,
    device: torch.device | str = "cpu",
    autocast: contextlib.AbstractContextManager | None = None,
    progress: str | None = None,
) -> Perplexity:
    """Perplexity of model on a 1-D tensor of token ids.

    model follows the project's interface: model(idx, targets) -> (logits
    [B, T, V], loss); targets of -1 are ignored; with hidden_states(idx) and
    lm_head only the scored positions reach the head (module docstring).
    Log-probabilities are taken in fp32. The caller puts the model in eval
    mode. progress: a label for a progress bar with ETA (stderr), or None.
    """
    tokens = tokens.to(torch.long).flatten()
    windows = plan_windows(tokens.numel(), block, stride)
    score = _nll_from_hidden if hasattr(model, "hidden_states") else _nll_from_forward
    # Summed on the device and read once, so batches are queued without a sync;
    # in float64 where the device has it (MPS does not).
    wide = torch.float32 if torch.device(device).type == "mps" else torch.float64
    nll = torch.zeros((), dtype=wide, device=device)
    bar = tqdm(
        total=tokens.numel() - 1,
        desc=progress,
        unit="tok",
        unit_scale=True,
        dynamic_ncols=True,
        mininterval=0.5,
        disable=progress is None,
    )
    with bar:
        for group in _batches(windows, batch_size):
            x = torch.stack([tokens[w.begin : w.end] for w in group]).to(device)
            rows, cols, targets = (t.to(device) for t in _scored(group, tokens))
            with autocast or contextlib.nullcontext():
                nll += score(model, x, rows, cols, targets).to(wide)
            bar.update(targets.numel())
    return Perplexity(nll.item(), tokens.numel() - 1, len(windows), block, stride)
