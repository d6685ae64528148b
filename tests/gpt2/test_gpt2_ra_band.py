"""RA's banded path (finite RA_MLA_RA_WINDOW) against the definition written out."""

from __future__ import annotations

import pytest
import torch

from gpt2.ra import banded_reciprocal


def explicit_reciprocal(q, k, v, q_all, n_past, alpha, window):
    """L_ij = (S_ij + alpha S_ji [0 <= i - j <= window]), -inf for j > i; all T x S scores."""
    n_new, n_all = q.size(2), k.size(2)
    direct = q @ k.transpose(-2, -1)  # q_i . k_j
    reverse = k[:, :, n_past:] @ q_all.transpose(-2, -1)  # k_i . q_j
    lag = torch.arange(n_past, n_past + n_new).unsqueeze(1) - torch.arange(n_all).unsqueeze(0)
    band = (lag >= 0) & (lag <= window)
    logits = (direct + alpha * reverse * band) / q.size(-1) ** 0.5
    return logits.masked_fill(lag < 0, float("-inf")).softmax(-1) @ v


def _qkv(n_all: int, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    q, k = (torch.randn(1, 2, n_all, 8, generator=gen, dtype=torch.float64) for _ in range(2))
    return q, k, torch.randn(1, 2, n_all, 5, generator=gen, dtype=torch.float64)


@pytest.mark.parametrize(
    ("n_new", "n_past", "window"),
    [
        (300, 0, 5),  # three query blocks, a narrow band
        (300, 0, 200),  # a band wider than a block
        (260, 0, 1),
        (40, 260, 17),  # new tokens after a cache
        (1, 299, 10),  # one decoding step
    ],
)
def test_banded_path_matches_the_definition(n_new: int, n_past: int, window: int) -> None:
    q_all, k, v = _qkv(n_past + n_new)
    q = q_all[:, :, n_past:]
    got = banded_reciprocal(q, k, v, q_all, n_past, 0.6, window)
    want = explicit_reciprocal(q, k, v, q_all, n_past, 0.6, window)
    torch.testing.assert_close(got, want, rtol=0, atol=1e-12)


def test_banded_path_gradients_match_the_definition() -> None:
    inputs = [t.requires_grad_() for t in _qkv(270, seed=1)]
    grads = []
    for attend in (banded_reciprocal, explicit_reciprocal):
        out = attend(inputs[0], inputs[1], inputs[2], inputs[0], 0, 0.4, 9)
        grads.append(torch.autograd.grad((out * out.detach().sign()).sum(), inputs))
    for got, want in zip(*grads):
        torch.testing.assert_close(got, want, rtol=0, atol=1e-10)


def test_banded_path_never_sees_a_later_token() -> None:
    q, k, v = _qkv(300, seed=2)
    out = banded_reciprocal(q, k, v, q, 0, 0.5, 7)
    changed = [t.clone() for t in (q, k, v)]
    for t in changed:
        t[:, :, 200:] += 1.0  # positions 200.. share a query block with 128..199
    q2, k2, v2 = changed
    out2 = banded_reciprocal(q2, k2, v2, q2, 0, 0.5, 7)
    assert torch.equal(out[:, :, :200], out2[:, :, :200])
    assert not torch.allclose(out[:, :, 200:], out2[:, :, 200:])
