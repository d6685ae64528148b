"""The chunked parallel scan equals the step-by-step slot recurrence."""

from __future__ import annotations

import pytest
import torch

from hamt.scan import chunk_ends, chunked_scan, decay_powers


def _inputs(length: int = 23, slots: int = 3, width: int = 6, batch: int = 2, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    bound = torch.randn(batch, length, width, generator=gen, dtype=torch.float64)
    gates = torch.rand(batch, length, slots, generator=gen, dtype=torch.float64)
    logits = torch.randn(batch, length, slots, generator=gen, dtype=torch.float64)
    readers = torch.softmax(logits, -1)
    log_decay = torch.log(torch.rand(slots, generator=gen, dtype=torch.float64) * 0.9 + 0.05)
    state = torch.randn(batch, slots, width, generator=gen, dtype=torch.float64)
    return bound, gates, readers, log_decay, state


def _reference(bound, gates, readers, log_decay, state):
    """M_s(t) = lambda_s M_s(t-1) + g_{t,s} B_t; read sum_s w_{t,s} M_s(t)."""
    memory, reads, history = state.clone(), [], []
    decay = log_decay.exp().unsqueeze(-1)
    for t in range(bound.size(1)):
        memory = decay * memory + gates[:, t].unsqueeze(-1) * bound[:, t].unsqueeze(1)
        reads.append((readers[:, t].unsqueeze(-1) * memory).sum(1))
        history.append(memory)
    return torch.stack(reads, 1), torch.stack(history, 1)


@pytest.mark.parametrize("chunk", [1, 4, 8, 23, 64])
def test_scan_matches_recurrence(chunk):
    bound, gates, readers, log_decay, state = _inputs()
    reads, afters = chunked_scan(bound, gates, readers, log_decay, chunk, state)
    expected, history = _reference(bound, gates, readers, log_decay, state)
    torch.testing.assert_close(reads, expected)
    torch.testing.assert_close(afters, history[:, chunk_ends(bound.size(1), chunk)])


def test_scan_without_initial_state():
    bound, gates, readers, log_decay, state = _inputs()
    reads, _ = chunked_scan(bound, gates, readers, log_decay, 8)
    expected, _ = _reference(bound, gates, readers, log_decay, torch.zeros_like(state))
    torch.testing.assert_close(reads, expected)


def test_scan_gradients():
    inputs = [t.requires_grad_() for t in _inputs(length=11, slots=2, width=4)]

    def run(bound, gates, readers, log_decay, state):
        reads, afters = chunked_scan(bound, gates, readers, log_decay, 4, state)
        return reads, afters

    assert torch.autograd.gradcheck(run, tuple(inputs))


def test_tiny_decays_stay_finite():
    # lambda = e^-50: no lambda^-t factor anywhere, so nothing overflows.
    bound, gates, readers, _, state = _inputs()
    log_decay = torch.full((3,), -50.0, dtype=torch.float64)
    reads, afters = chunked_scan(bound, gates, readers, log_decay, 16, state)
    assert torch.isfinite(reads).all() and torch.isfinite(afters).all()
    expected, _ = _reference(bound, gates, readers, log_decay, state)
    torch.testing.assert_close(reads, expected)


def test_decay_powers_zero_for_negative_exponents():
    powers = decay_powers(torch.tensor([-0.1, -1.0]), torch.tensor([-2, 0, 3]))
    assert powers[0].eq(0).all()
    torch.testing.assert_close(powers[1], torch.ones(2))
    torch.testing.assert_close(powers[2], torch.exp(torch.tensor([-0.3, -3.0])))
