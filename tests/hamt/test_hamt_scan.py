"""The chunked parallel scan equals the step-by-step slot recurrence."""

from __future__ import annotations

import pytest
import torch

from hamt.scan import (
    broadcast_mix,
    chunk_ends,
    chunked_scan,
    decay_powers,
    factored_mix,
    mixing_matrix,
)


def _inputs(length: int = 23, slots: int = 3, width: int = 6, batch: int = 2, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    bound = torch.randn(batch, length, width, generator=gen, dtype=torch.float64)
    gates = torch.rand(batch, length, slots, generator=gen, dtype=torch.float64)
    logits = torch.randn(batch, length, slots, generator=gen, dtype=torch.float64)
    readers = torch.softmax(logits, -1)
    log_decay = torch.log(torch.rand(slots, generator=gen, dtype=torch.float64) * 0.9 + 0.05)
    state = torch.randn(batch, slots, width, generator=gen, dtype=torch.float64)
    return bound, gates, readers, log_decay, state


def _reference(bound, gates, readers, log_decay, state, periods=None, offset=0):
    """M_s(t) = lambda_s M_s(t-1) + g_{t,s} B_t; read sum_s w_{t,s} M_s(t).
    With periods, slot s does that only at stream positions p = offset + t
    with (p + 1) % periods[s] == 0 and keeps M_s(t) = M_s(t-1) elsewhere."""
    memory, reads, history = state.clone(), [], []
    decay = log_decay.exp().unsqueeze(-1)
    for t in range(bound.size(1)):
        update = decay * memory + gates[:, t].unsqueeze(-1) * bound[:, t].unsqueeze(1)
        if periods is None:
            memory = update
        else:
            ticks = ((offset + t + 1) % periods == 0).view(-1, 1)
            memory = torch.where(ticks, update, memory)
        reads.append((readers[:, t].unsqueeze(-1) * memory).sum(1))
        history.append(memory)
    return torch.stack(reads, 1), torch.stack(history, 1)


@pytest.mark.parametrize("chunk", [1, 4, 8, 23, 64])
def test_scan_matches_recurrence(chunk):
    bound, gates, readers, log_decay, state = _inputs()
    reads, afters = chunked_scan(bound, gates, readers, log_decay, chunk, state)
    expected, history = _reference(bound, gates, readers, log_decay, state)
    torch.testing.assert_close(reads, expected)
    ends = chunk_ends(bound.size(1), chunk)
    torch.testing.assert_close(afters, history[:, ends])


def test_scan_without_initial_state():
    bound, gates, readers, log_decay, state = _inputs()
    reads, _ = chunked_scan(bound, gates, readers, log_decay, 8)
    expected, _ = _reference(bound, gates, readers, log_decay, torch.zeros_like(state))
    torch.testing.assert_close(reads, expected)


def test_scan_gradients():
    inputs = [t.requires_grad_() for t in _inputs(length=11, slots=2, width=4)]

    def run(bound, gates, readers, log_decay, state):
        return chunked_scan(bound, gates, readers, log_decay, 4, state)

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
    powers = decay_powers(torch.tensor([-0.1, -1.0]), torch.tensor([-2, 0, 3]).unsqueeze(-1))
    assert powers[0].eq(0).all()
    torch.testing.assert_close(powers[1], torch.ones(2))
    torch.testing.assert_close(powers[2], torch.exp(torch.tensor([-0.3, -3.0])))


def _mix_by_hand(gates, readers, log_decay):
    """mix[n, i, j] = sum_s w[n, i, s] g[n, j, s] lambda_s^(i - j) for j <= i, by loops."""
    n, size, _ = gates.shape
    mix = torch.zeros(n, size, size, dtype=gates.dtype)
    for i in range(size):
        for j in range(i + 1):
            mix[:, i, j] = (readers[:, i] * gates[:, j] * torch.exp((i - j) * log_decay)).sum(-1)
    return mix


@pytest.mark.parametrize("size", [1, 7, 32])
def test_factored_and_broadcast_mix_match_the_definition(size):
    _, gates, readers, _, _ = _inputs(length=size, slots=3, batch=4)
    # Decays from 0.2 to 0.99: within the factored form's range at C = 32.
    log_decay = torch.log(torch.tensor([0.2, 0.7, 0.99], dtype=torch.float64))
    expected = _mix_by_hand(gates, readers, log_decay)
    torch.testing.assert_close(factored_mix(gates, readers, log_decay), expected)
    torch.testing.assert_close(broadcast_mix(gates, readers, log_decay), expected)
    assert torch.equal(
        mixing_matrix(gates, readers, log_decay), factored_mix(gates, readers, log_decay)
    )


def test_fast_forgetting_slots_take_the_broadcast():
    _, gates, readers, _, _ = _inputs(length=32, slots=3, batch=2)
    log_decay = torch.log(torch.tensor([0.1, 0.7, 0.99], dtype=torch.float64))  # 0.1 < 0.14
    factored = factored_mix(gates.float(), readers.float(), log_decay.float() * 30)
    assert not torch.isfinite(factored).all()  # why it is not used here: it overflows
    mix = mixing_matrix(gates, readers, log_decay)
    assert torch.equal(mix, broadcast_mix(gates, readers, log_decay))
    torch.testing.assert_close(mix, _mix_by_hand(gates, readers, log_decay))


def _clocked(periods, offset, length, gates):
    """HolographicMemory's clock for these periods: ticks through each
    position, and the gates zeroed where a slot does not tick."""
    upto = torch.arange(offset + 1, offset + length + 1).unsqueeze(-1)
    clock = upto // periods - offset // periods
    return clock, gates * (upto % periods == 0)


# Chunks of 4, 5 and 8 against a period of 3: boundaries on and off the
# period; offsets 0 and 7 (a stream that started before this call).
@pytest.mark.parametrize("chunk, offset", [(4, 0), (5, 7), (8, 7), (1, 2), (64, 1)])
def test_slow_slots_scan_matches_recurrence(chunk, offset):
    bound, gates, readers, log_decay, state = _inputs()
    periods = torch.tensor([1, 3, 5])
    clock, gates = _clocked(periods, offset, bound.size(1), gates)
    reads, afters = chunked_scan(bound, gates, readers, log_decay, chunk, state, clock)
    expected, history = _reference(bound, gates, readers, log_decay, state, periods, offset)
    torch.testing.assert_close(reads, expected)
    torch.testing.assert_close(afters, history[:, chunk_ends(bound.size(1), chunk)])


def test_slow_slots_change_only_at_their_ticks():
    bound, gates, readers, log_decay, state = _inputs()
    periods = torch.tensor([1, 3, 5])
    clock, gates = _clocked(periods, 2, bound.size(1), gates)
    _, afters = chunked_scan(bound, gates, readers, log_decay, 1, state, clock)  # every token
    before = torch.cat((state.unsqueeze(1), afters[:, :-1]), 1)
    changed = (afters != before).any(-1).any(0)  # [T, S]
    ticks = torch.arange(3, 3 + bound.size(1)).unsqueeze(-1) % periods == 0
    assert torch.equal(changed, ticks)
    assert ticks[:, 0].all() and ticks[:, 2].sum() == 5  # positions 4, 9, ..., 24


def test_slow_slots_scan_gradients():
    bound, gates, readers, log_decay, state = [
        t.requires_grad_() for t in _inputs(length=11, slots=3, width=4)
    ]
    periods = torch.tensor([1, 2, 3])
    clock, _ = _clocked(periods, 1, 11, gates)
    ticks = (torch.arange(2, 13).unsqueeze(-1) % periods == 0).double()

    def run(bound, gates, readers, log_decay, state):
        return chunked_scan(bound, gates * ticks, readers, log_decay, 4, state, clock)

    assert torch.autograd.gradcheck(run, (bound, gates, readers, log_decay, state))


def test_clocked_mix_is_factored_when_ticks_are_sparse():
    # A decay of 0.02 per token overflows the factored form at C = 32
    # (15.5 x 3.9 > 30); ticking every 4th token it spans 4 ticks, and the
    # factored form is taken and equals the broadcast.
    _, gates, readers, _, _ = _inputs(length=32, slots=3, batch=2)
    log_decay = torch.log(torch.tensor([0.02, 0.7, 0.99], dtype=torch.float64))
    clock, gates = _clocked(torch.tensor([4, 1, 2]), 5, 32, gates)  # one chunk: ticks = clock
    ticks = clock.double()
    mix = mixing_matrix(gates, readers, log_decay, ticks)
    assert torch.equal(mix, factored_mix(gates, readers, log_decay, ticks))
    torch.testing.assert_close(mix, broadcast_mix(gates, readers, log_decay, ticks))
    per_token = mixing_matrix(gates, readers, log_decay)
    assert torch.equal(per_token, broadcast_mix(gates, readers, log_decay))
