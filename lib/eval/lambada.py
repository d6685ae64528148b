"""LAMBADA-style last-word prediction (Paperno et al. 2016; GPT-2 paper, section 3.3).

Each passage is split at its last space into a context and a target word
(" word", with its leading space, as GPT-2's BPE writes it). A passage counts
as correct when the model's greedy choice is right for every token of the
target, each predicted from the context and the target tokens before it.
The perplexity is exp of the mean, over passages, of the target word's
summed negative log-likelihood: a per-word figure, as LAMBADA reports.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from tqdm import tqdm

from lib.data.tokenizers import Tokenizer


def split_last_word(text: str) -> tuple[str, str]:
    """("context", " target") of a passage; ValueError if it has one word."""
    text = text.strip()
    cut = text.rfind(" ")
    if cut <= 0:
        raise ValueError(f"passage {text[:60]!r} has no context before its last word")
    return text[:cut], text[cut:]


def encode_passages(
    texts: Sequence[str], tokenizer: Tokenizer, block: int
) -> list[tuple[list[int], int]]:
    """(input ids, target length) per passage: the model reads ids[:-1] and
    must predict the last `target length` ids. Long contexts lose their start."""
    out = []
    for text in texts:
        context, target = split_last_word(text)
        ctx, tgt = tokenizer.encode(context), tokenizer.encode(target)
        if not ctx or not tgt or len(tgt) > block:
            raise ValueError(f"passage {text[:60]!r} cannot be scored with a {block}-token context")
        ids = (ctx + tgt)[-(block + 1) :]
        out.append((ids, len(tgt)))
    return out


@torch.no_grad()
def last_word_accuracy(
    model: nn.Module,
    tokenizer: Tokenizer,
    texts: Sequence[str],
    block: int,
    batch_size: int = 8,
    device: torch.device | str = "cpu",
    autocast: contextlib.AbstractContextManager | None = None,
    progress: str | None = None,
) -> dict[str, Any]:
    """Accuracy and per-word perplexity of the last word of each passage.

    Passages are batched with right padding: the model is causal, so padding
    after a passage's last input cannot change its logits. progress: a label
    for a progress bar with ETA (stderr), or None.
    """
    passages = encode_passages(texts, tokenizer, block)
    correct, nll_total, target_tokens = 0, 0.0, 0
    starts = range(0, len(passages), batch_size)
    for start in tqdm(
        starts,
        desc=progress,
        unit="batch",
        dynamic_ncols=True,
        mininterval=0.5,
        disable=progress is None,
    ):
        group = passages[start : start + batch_size]
        width = max(len(ids) - 1 for ids, _ in group)
        x = torch.zeros(len(group), width, dtype=torch.long)
        y = torch.full((len(group), width), -1, dtype=torch.long)
        for row, (ids, n_target) in enumerate(group):
            n_in = len(ids) - 1
            x[row, :n_in] = torch.tensor(ids[:-1])
            y[row, n_in - n_target : n_in] = torch.tensor(ids[-n_target:])
        x, y = x.to(device), y.to(device)
        with autocast or contextlib.nullcontext():
            logits, _ = model(x, y)
        logits = logits.float()
        for row, (_, n_target) in enumerate(group):
            keep = y[row] >= 0
            scored, target = logits[row][keep], y[row][keep]
            correct += bool((scored.argmax(-1) == target).all())
            nll_total += F.cross_entropy(scored, target, reduction="sum").item()
            target_tokens += n_target
    n = len(passages)
    return {
        "accuracy": correct / n,
        "correct": correct,
        "examples": n,
        "perplexity": math.exp(min(nll_total / n, 700.0)),
        "target_tokens": target_tokens,
    }
