"""Gradient checkpointing per block: same losses and gradients, less memory."""

from __future__ import annotations

import torch

from gpt2.config import GPT2Config
from gpt2.model import GPT2
from hamt.config import HAMTConfig
from hamt.model import HAMT
from lib.bench.memory import cpu_peak_bytes
from lib.train.recompute import enable_checkpointing


def loss_and_grads(model, idx, targets, seed=0):
    torch.manual_seed(seed)  # the same dropout masks in both runs
    _, loss = model(idx, targets)
    loss.backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad(set_to_none=True)
    return loss.item(), grads


def test_checkpointed_blocks_give_the_same_loss_and_gradients():
    for make in (
        lambda: GPT2(
            GPT2Config(vocab_size=64, block_size=32, n_layer=3, n_head=2, n_embd=32, dropout=0.1)
        ),
        lambda: HAMT(HAMTConfig(vocab_size=64, block_size=32, n_layer=2, n_embd=32, dropout=0.1)),
    ):
        torch.manual_seed(1)
        plain = make()
        wrapped = make()
        wrapped.load_state_dict(plain.state_dict())
        assert enable_checkpointing(wrapped) == len(wrapped.transformer.h)
        assert enable_checkpointing(wrapped) == 0  # idempotent
        assert list(wrapped.state_dict()) == list(plain.state_dict())
        idx = torch.randint(64, (4, 32))
        targets = torch.randint(64, (4, 32))
        loss, grads = loss_and_grads(plain, idx, targets)
        loss_ckpt, grads_ckpt = loss_and_grads(wrapped, idx, targets)
        assert loss_ckpt == loss  # recomputation redraws the same dropout masks
        for name, grad in grads.items():
            torch.testing.assert_close(grads_ckpt[name], grad, msg=name)


def test_checkpointing_lowers_the_measured_peak():
    torch.manual_seed(0)
    model = GPT2(GPT2Config(vocab_size=64, block_size=128, n_layer=6, n_head=4, n_embd=64))
    idx = torch.randint(64, (8, 128))

    def step():
        model(idx, idx)[1].backward()
        model.zero_grad(set_to_none=True)

    plain = cpu_peak_bytes(step)
    enable_checkpointing(model)
    with torch.no_grad():  # evaluation runs the blocks as usual
        model(idx, idx)
    assert cpu_peak_bytes(step) < 0.6 * plain
