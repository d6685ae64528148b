"""A tiny HAMT learns: AdamW on a fixed batch drives the loss down."""

from __future__ import annotations

import pytest
import torch

from hamt.config import HAMTConfig
from hamt.model import HAMT
from tests.stochastic import observe


def _setup(seed: int = 0):
    torch.manual_seed(seed)
    model = HAMT(
        HAMTConfig(
            vocab_size=101,
            block_size=64,
            n_layer=2,
            n_head=4,
            n_embd=32,
            num_slots=4,
            hcm_mult=2,
            chunk_size=16,
        )
    )
    data = torch.randint(101, (4, 33), generator=torch.Generator().manual_seed(seed + 1))
    return model, data[:, :-1], data[:, 1:]


@pytest.mark.stochastic
def test_thirty_adamw_steps_reduce_loss(seed):
    model, x, y = _setup(seed)
    optimizer = torch.optim.AdamW(model.param_groups(0.1), lr=1e-2)
    losses = []
    for _ in range(30):
        _, loss = model(x, y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    # Spread over seeds 0-7 at one thread (AVX-512, AVX2 kernels) and 0-2 at 2 and 4: 0.081-0.223.
    assert observe("last / first loss", losses[-1] / losses[0]) < 0.7, losses


def test_every_parameter_gets_a_gradient():
    model, x, y = _setup()
    _, loss = model(x, y)
    loss.backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name
        assert p.grad.abs().sum() > 0, name
