"""A 2-layer GPT-2 trained a few steps with a Pruner, as the trainer drives it:
the shared run of tests/lib/prune/test_prune_pruner.py and test_prune_masks.py."""

from __future__ import annotations

import torch

from gpt2.config import GPT2Config
from gpt2.model import GPT2

STEPS = 40
SCHEDULE = dict(target=0.5, warmup=5, ramp_end=30, frequency=5)


def make_model(seed: int = 0):
    torch.manual_seed(seed)
    model = GPT2(GPT2Config(vocab_size=101, block_size=32, n_layer=2, n_head=4, n_embd=64))
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.1)
    return model, optimizer


def batches(n: int, seed: int = 1) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(0, 101, (4, 33), generator=g) for _ in range(n)]


def train(model, optimizer, pruner, data, first: int, last: int) -> list[list[torch.Tensor]]:
    """Optimizer steps first..last (1-based), as the trainer drives them; masks after each."""
    history = []
    for step in range(first, last + 1):
        x = data[step - 1]
        _, loss = model(x[:, :-1], x[:, 1:])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        pruner.before_step(step)
        optimizer.step()
        pruner.after_step(step)
        history.append([m.clone() for m in pruner.masks])
    return history
