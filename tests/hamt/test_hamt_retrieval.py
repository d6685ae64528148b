"""The retrieval auxiliary loss: earlier items, a detached target, and no
reward for forgetting."""

from __future__ import annotations

import math

import pytest
import torch

from hamt.config import HAMTConfig
from hamt.memory import bind, make_key, parseval_weights, unbind
from hamt.model import HAMT
from hamt.retrieval import retrieval_loss, sample_sources
from hamt.scan import chunk_ends, chunked_scan
from hamt.spectral import from_spectrum, to_spectrum
from lib.run.checkpoint import rng_state, set_rng_state

# The range: the old loss went from 0.57 to 0.00 along it.
DECAYS = (0.9, 0.7, 0.5, 0.3, 0.1, 0.01, 0.0025)


def _random_writes(batch=8, length=128, slots=4, width=64, seed=0):
    gen = torch.Generator().manual_seed(seed)
    bound = torch.randn(batch, length, width, generator=gen)
    gates = torch.rand(batch, length, slots, generator=gen)
    readers = torch.softmax(torch.randn(batch, length, slots, generator=gen), -1)
    return bound, gates, readers


def _non_decreasing(values, tolerance=0.005):
    return all(b >= a - tolerance for a, b in zip(values, values[1:]))


def test_lowering_the_decay_does_not_lower_the_loss():
    """Fixed random writes, every slot at one decay: asking for earlier items
    gets harder as the memory forgets faster. The loss the issue reported
    (lag 0, the item just written) falls instead, so this test can fail."""
    bound, gates, readers = _random_writes()
    length, chunk = bound.size(1), 16
    parseval = parseval_weights("circular", bound.size(-1))
    sources = sample_sources(length, chunk, bound.size(0), 32, False, bound.device)
    just_written = torch.tensor(chunk_ends(length, chunk)).expand(bound.size(0), -1)
    earlier, lag0 = [], []
    for decay in DECAYS:
        log_decay = torch.full((gates.size(-1),), math.log(decay))
        _, afters = chunked_scan(bound, gates, readers, log_decay, chunk)
        earlier.append(retrieval_loss(afters, bound, gates, sources, parseval).item())
        lag0.append(retrieval_loss(afters, bound, gates, just_written, parseval).item())
    # Measured: 0.832, 0.934, 0.977, 0.996, 1.003, 1.004, 1.004.
    assert _non_decreasing(earlier) and earlier[-1] > earlier[0] + 0.1, earlier
    # Measured: 0.488, 0.217, 0.098, 0.035, 0.004, 0.000, 0.000.
    assert not _non_decreasing(lag0) and lag0[0] > 0.4 and lag0[-1] < 0.01, lag0


def test_untrained_model_aux_loss_rises_as_decay_falls():
    torch.manual_seed(0)
    model = HAMT(
        HAMTConfig(
            vocab_size=101,
            block_size=128,
            n_layer=2,
            n_head=1,
            n_embd=32,
            num_slots=4,
            hcm_mult=2,
            chunk_size=16,
        )
    ).eval()
    idx = torch.randint(101, (8, 128), generator=torch.Generator().manual_seed(1))
    losses = []
    for decay in DECAYS:
        for block in model.transformer.h:
            block.mem.decay_logit.data.fill_(math.log(decay / (1 - decay)))
        with torch.no_grad():
            model(idx, idx)
        losses.append(model.aux_metrics()["aux_loss"])
    # Measured: 0.791, 0.895, 0.945, 0.973, 0.988, 0.992, 0.992 (the old loss:
    # 0.547, 0.287, 0.137, 0.048, 0.005, 0.000, 0.000).
    assert _non_decreasing(losses) and losses[-1] > losses[0] + 0.1, losses


def test_loss_is_one_minus_cosine_of_the_unbound_earlier_value():
    """By hand in the vector domain: unbind tau's write key from the slots
    weighted by tau's gates, compare with tau's value."""
    batch, length, slots, dim, chunk = 2, 12, 3, 16, 4
    gen = torch.Generator().manual_seed(3)
    keys = make_key(torch.randn(batch, length, dim, generator=gen))
    values = torch.randn(batch, length, dim, generator=gen)
    gates = torch.rand(batch, length, slots, generator=gen)
    readers = torch.softmax(torch.randn(batch, length, slots, generator=gen), -1)
    log_decay = torch.log(torch.tensor([0.5, 0.8, 0.95]))
    bound = to_spectrum(bind(keys, values), "circular")
    _, afters = chunked_scan(bound, gates, readers, log_decay, chunk)
    sources = torch.tensor([[2, 6, 7], [-1, 4, 10]])  # queries at 3, 7, 11; -1: none
    loss = retrieval_loss(afters, bound, gates, sources, parseval_weights("circular", dim))
    slots_vec = from_spectrum(afters, "circular")  # [B, N, S, D]
    terms = []
    for b in range(batch):
        for n, tau in enumerate(sources[b].tolist()):
            if tau < 0:
                continue
            weights = gates[b, tau] / gates[b, tau].sum()
            retrieved = unbind(keys[b, tau], weights @ slots_vec[b, n])
            terms.append(1 - torch.cosine_similarity(retrieved, values[b, tau], dim=0))
    torch.testing.assert_close(loss, torch.stack(terms).mean(), atol=1e-5, rtol=0)


def test_target_is_detached():
    bound, gates, readers = _random_writes(batch=2, length=32, width=8)
    bound.requires_grad_()
    gates.requires_grad_()
    log_decay = torch.full((4,), math.log(0.8))
    _, afters = chunked_scan(bound, gates, readers, log_decay, 8)
    sources = sample_sources(32, 8, 2, 16, False, bound.device)
    loss = retrieval_loss(afters.detach(), bound, gates, sources, parseval_weights("circular", 8))
    grad_bound, grad_gates = torch.autograd.grad(loss, (bound, gates), allow_unused=True)
    assert grad_bound is None  # the target gives bound no gradient; the memory does
    assert grad_gates.abs().sum() > 0  # the slot weights are learned


def test_lags_stay_in_the_window():
    sources = sample_sources(100, 8, 400, 20, True, torch.device("cpu"))
    ends = torch.tensor(chunk_ends(100, 8))
    lags = ends - sources
    window = ends.clamp(max=20)
    assert ((lags >= 1) & (lags <= window)).all()
    assert lags[:, 0].unique().tolist() == list(range(1, 8))  # t = 7: lags 1..7
    assert lags[:, -1].unique().tolist() == list(range(1, 21))  # every lag is drawn
    first = sample_sources(5, 1, 3, 20, True, torch.device("cpu"))  # chunk 1: t = 0 too
    assert (first[:, 0] == -1).all() and (first[:, 1] == 0).all()


def test_lags_resume_with_the_trainer_rng_state_and_eval_is_fixed():
    cpu = torch.device("cpu")
    saved = rng_state()  # what lib/run/checkpoint.py stores with a checkpoint
    drawn = sample_sources(256, 16, 4, 32, True, cpu)
    set_rng_state(saved)
    assert torch.equal(sample_sources(256, 16, 4, 32, True, cpu), drawn)
    assert not torch.equal(sample_sources(256, 16, 4, 32, True, cpu), drawn)
    before = torch.get_rng_state()
    fixed = sample_sources(256, 16, 4, 32, False, cpu)
    assert torch.equal(sample_sources(256, 16, 4, 32, False, cpu), fixed)
    assert torch.equal(torch.get_rng_state(), before)  # evaluation leaves training's stream


@pytest.mark.parametrize("length", [1, 2])
def test_short_sequences_have_a_finite_loss(length):
    torch.manual_seed(0)
    model = HAMT(
        HAMTConfig(vocab_size=11, n_layer=1, n_head=1, n_embd=16, num_slots=4, chunk_size=1)
    )
    idx = torch.randint(11, (2, length))
    _, loss = model(idx, idx)
    loss.backward()
    assert torch.isfinite(loss)
    assert (model.aux_metrics()["aux_loss"] == 0) == (length == 1)  # t = 0 has no earlier item
