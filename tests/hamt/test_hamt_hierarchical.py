"""The hierarchical slow bank: slow by construction, exact across chunking
and cached generation."""

from __future__ import annotations

import math

import pytest
import torch

from hamt.config import HAMTConfig
from hamt.model import HAMT

VOCAB, EVERY = 101, 3


def _model(**overrides) -> HAMT:
    fields = dict(
        vocab_size=VOCAB,
        block_size=64,
        n_layer=2,
        n_head=1,
        n_embd=32,
        num_slots=4,
        hierarchical=True,
        slow_every=EVERY,
        chunk_size=8,
    )
    torch.manual_seed(0)
    return HAMT(HAMTConfig(**fields | overrides)).eval()


def _tokens(batch: int, length: int, seed: int = 1) -> torch.Tensor:
    return torch.randint(VOCAB, (batch, length), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("binding", ["circular", "elementwise"])
def test_cached_generation_across_calls_matches_one_forward(binding):
    """Prompt, steps, a second prompt continuing the same state, steps: every
    logit equals one parallel pass over the whole stream. Chunks of 8 and a
    period of 3 put chunk boundaries off the period; the second prompt
    starts at 19, inside a period and a chunk."""
    model = _model(binding=binding)
    idx = _tokens(2, 40)
    with torch.no_grad():
        x, final, _ = model._run(idx, None, need_state=True, need_aux=False)
        expected = model.lm_head(x)
        got = {}
        logits, state = model.prefill(idx[:, :13])
        got[12] = logits
        for t in range(13, 19):
            got[t], state = model.forward_step(idx[:, t], state)
        logits, state = model.prefill(idx[:, 19:30], state)
        got[29] = logits
        for t in range(30, 40):
            got[t], state = model.forward_step(idx[:, t], state)
    assert state.position == 40
    for t, logits in got.items():
        torch.testing.assert_close(logits, expected[:, t : t + 1], atol=1e-5, rtol=0)
    for a, b in zip(final, state.slots):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=0)


def test_slow_bank_changes_only_every_period_whatever_its_decay():
    """Fast slots change at every token, slow ones only at stream positions
    t with (t + 1) % 3 == 0, even with the slow decays pushed to 0.0025 (a
    decay can be trained; the period cannot)."""
    model = _model()
    for block in model.transformer.h:
        block.mem.decay_logit.data[2:] = math.log(0.0025 / 0.9975)
    idx = _tokens(1, 20)
    with torch.no_grad():
        _, state = model.prefill(idx[:, :4])  # positions 0..3, then steps from 4
        changed = []
        for t in range(4, 20):
            _, after = model.forward_step(idx[:, t], state)
            changed.append(
                [
                    bool((a[:, s] != b[:, s]).any())
                    for a, b in zip(after.slots, state.slots)
                    for s in range(4)
                ]
            )
            state = after
    for t, row in zip(range(4, 20), changed):
        tick = (t + 1) % EVERY == 0
        assert row == [True, True, tick, tick] * 2, t  # 2 layers x (2 fast, 2 slow)


def test_every_one_is_the_per_token_memory():
    """slow_every = 1: the slow bank ticks at every token, so the layer is
    the plain memory with the hierarchical initialisation."""
    plain = HAMT(
        HAMTConfig(vocab_size=VOCAB, n_layer=2, n_head=1, n_embd=32, num_slots=4, chunk_size=8)
    ).eval()
    every = _model(slow_every=1)
    plain.load_state_dict(every.state_dict())
    assert not every.transformer.h[0].mem.ticking
    idx = _tokens(2, 30)
    torch.testing.assert_close(plain(idx)[0], every(idx)[0], rtol=0, atol=0)


def test_training_step_with_the_slow_bank():
    model = _model().train()
    idx = _tokens(2, 33)
    _, loss = model(idx[:, :-1], idx[:, 1:])
    loss.backward()
    assert torch.isfinite(loss)
    for name, p in model.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name
    # The slow decays learn from the ticks they take.
    assert model.transformer.h[0].mem.decay_logit.grad[2:].abs().min() > 0
