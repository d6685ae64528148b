"""Importance scores against hand-computed values; bitter4's per-layer budgets."""
from __future__ import annotations

import math

import pytest
import torch

from lib.prune import VARIANTS
from lib.prune import scores as S
from lib.prune.layers import allocate, layer_factors

W = torch.tensor([-2.0, 0.5, 3.0])
M = torch.tensor([0.25, -1.0, 4.0])  # sqrt|m| = [0.5, 1, 2]
V = torch.tensor([0.0625, 4.0, 16.0])  # sqrt(v) = [0.25, 2, 4], v^0.25 = [0.5, sqrt 2, 2]

# Worked by hand with eps = 0, beta1 = 0.9, t = 1 unless a variant needs otherwise.
EXPECTED = {
    "bitter0": [0.5 * 2 / 0.25, 0.5 * 0.5 / 2, 12 * 3 / 4],  # |w m| |w| / sqrt(v)
    "bitter1": [2.0, 0.5, 3.0],
    "bitter2": [2.0, 0.5, 3.0],
    "bitter3": [1.0, 0.5, 6.0],  # |w| sqrt|m|
    "bitter4": [1.0, 0.5, 6.0],
    "bitter5": [1.0 + 0.2, 0.5 + 0.05, -1.0 + 0.3],  # -sign(w) m / sqrt(v) + 0.1|w|
    "bitter6": [1.0 * 1.0, 0.5 * 0.5, 6.0 * 1.0],  # bitter3 * sqrt(m^2/v) = * [1, 0.5, 1]
    "bitter7": [2 * 0.5, 0.5 * math.sqrt(2), 3 * 2.0],  # |w| v^0.25 (+1e-8 inside)
    "bitter9": [0.5 * 4 * 0.0625, 0.5 * 0.25 * 4, 0.5 * 9 * 16],  # 0.5 w^2 v
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_variant_matches_its_formula(name):
    fn, description = VARIANTS[name]
    got = fn(W, M, V, step=1, beta1=0.9, eps=0.0)
    assert got.tolist() == pytest.approx(EXPECTED[name], rel=1e-6)
    assert description and fn.__doc__


def test_bitter8_uses_bias_corrected_momentum():
    m = torch.tensor([0.1875, -0.75, 3.0])  # 0.75 * M, and 1 - 0.5^2 = 0.75
    got = S.bitter8(W, m, V, step=torch.tensor(2.0), beta1=0.5, eps=0.0)
    assert got.tolist() == pytest.approx([1.0, 0.5, 6.0], rel=1e-6)
    # Step 0 (no update yet) is treated as step 1: 1 - 0.5 = 0.5, m_hat = 2 m.
    got0 = S.bitter8(W, m, V, step=0, beta1=0.5, eps=0.0)
    assert got0.tolist() == pytest.approx([2 * math.sqrt(0.375), 0.5 * math.sqrt(1.5),
                                           3 * math.sqrt(6.0)], rel=1e-6)


def test_eps_guards_zero_second_moment():
    zeros = torch.zeros(3)
    for name, (fn, _) in VARIANTS.items():
        out = fn(W, M, zeros, step=1, beta1=0.9, eps=1e-8)
        assert torch.isfinite(out).all(), name
    assert S.bitter0(W, M, V, step=1, beta1=0.9, eps=1e-8).tolist() == pytest.approx(
        EXPECTED["bitter0"], rel=1e-6)


def test_variant_table_is_complete_and_returns_new_tensors():
    assert sorted(VARIANTS) == [f"bitter{i}" for i in range(10)]
    for name, (fn, _) in VARIANTS.items():
        w = W.clone()
        out = fn(w, M, V, step=3, beta1=0.9, eps=1e-8)
        assert out.data_ptr() != w.data_ptr() and torch.equal(w, W), name


def test_magnitude_and_movement_increment():
    assert S.magnitude(W).tolist() == [2.0, 0.5, 3.0]
    grad = torch.tensor([1.0, -2.0, 0.5])
    assert S.movement_increment(W, grad).tolist() == [2.0, 1.0, -1.5]  # -(w * grad)


def test_layer_factors_rank_by_mean_score():
    assert layer_factors([3.0, 1.0, 2.0]) == pytest.approx([0.7, 1.3, 1.0])
    assert layer_factors([5.0]) == [1.0]
    assert layer_factors([1.0, 1.0]) == pytest.approx([1.3, 0.7])  # ties: parameter order


def test_allocate_follows_factors_and_hits_the_global_count():
    assert allocate([100, 100, 100], [0, 0, 0], [0.7, 1.3, 1.0], 0.5) == [35, 65, 50]
    # Target 0.8: layer 1 would need 104 > cap 95; the rest share 145 as 56:80.
    # 56 * 145/136 = 59.71, 80 * 145/136 = 85.29 -> the larger remainder rounds up.
    assert allocate([100, 100, 100], [0, 0, 0], [0.7, 1.3, 1.0], 0.8) == [60, 95, 85]
    # Already-pruned entries are a floor: layer 0 keeps 50, the others share 100 as 65:50.
    assert allocate([100, 100, 100], [50, 0, 0], [0.7, 1.3, 1.0], 0.5) == [50, 57, 43]
    assert allocate([100, 100], [10, 20], [1.3, 0.7], 0.0) == [10, 20]
