"""Importance scores against formulas evaluated independently in float64 (Python
math and NumPy's float16 rounding, not torch); bitter4's per-layer budgets."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from lib.prune import scores as S
from lib.prune.layers import allocate, depth_ramp, layer_factors
from lib.prune.scores import VARIANTS

# Fixed moments: the last two columns have v too small for float16 (1e-9 reads
# as 0, 3e-8 as a subnormal) and a w that float16 rounds (1.0001 -> 1.0).
W = [-2.0, 0.5, 3.0, -0.25, 1.0001]
M = [0.25, -1.0, 4.0, 0.5, -0.003]
V = [0.0625, 4.0, 16.0, 1e-9, 3e-8]


def f16(x: float) -> float:
    return float(np.float16(x))


def sign(x: float) -> float:
    return math.copysign(1.0, x) if x else 0.0


def bitter8_by_hand(w: float, v: float) -> float:
    # Each float16 operation rounds its exact result to float16.
    floor = f16(abs(f16(v)) + 1e-5)
    root4 = f16(1.0 / math.sqrt(f16(1.0 / math.sqrt(floor))))
    return f16(abs(f16(w)) * root4)


E = 1e-8
FORMULAS = {
    "bitter0": lambda w, m, v: abs(w * m) * abs(w) / (math.sqrt(v) + E),
    "bitter1": lambda w, m, v: abs(w),
    "bitter2": lambda w, m, v: abs(w),
    "bitter3": lambda w, m, v: abs(w) * math.sqrt(abs(m) + E),
    "bitter4": lambda w, m, v: abs(w) * math.sqrt(abs(m) + E),
    "bitter5": lambda w, m, v: sign(w) * m / (math.sqrt(v) + E) + 0.1 * abs(w),
    "bitter6": lambda w, m, v: abs(w) * math.sqrt(abs(m) + E) * math.sqrt(m * m / (v + E)),
    "bitter7": lambda w, m, v: abs(w) * (abs(v) + E) ** 0.25,
    "bitter8": lambda w, m, v: bitter8_by_hand(w, v),
    "bitter9": lambda w, m, v: abs(w) * (abs(v) + 1e-5) ** 0.25,
    "obd": lambda w, m, v: 0.5 * w * w * v,
    "toward_zero": lambda w, m, v: -sign(w) * m / (math.sqrt(v) + E) + 0.1 * abs(w),
}


@pytest.mark.parametrize("name", sorted(FORMULAS))
def test_variant_matches_its_formula(name):
    variant = VARIANTS[name]
    got = variant.fn(torch.tensor(W), torch.tensor(M), torch.tensor(V))
    expected = [FORMULAS[name](w, m, v) for w, m, v in zip(W, M, V)]
    assert got.dtype == torch.float32
    # float32 arithmetic against float64: a few ulps (bitter8: equal float16 values).
    assert got.tolist() == pytest.approx(expected, rel=1e-6, abs=1e-12)
    assert variant.summary and variant.fn.__doc__
    assert variant.ours == (not name.startswith("bitter"))


def test_bitter8_and_bitter9_differ_from_bitter7_where_float16_bites():
    w, m, v = torch.tensor(W), torch.tensor(M), torch.tensor(V)
    b7, b8, b9 = S.bitter7(w, m, v), S.bitter8(w, m, v), S.bitter9(w, m, v)
    assert b8[3] / b7[3] > 5  # v = 1e-9: 1e-5 floor instead of 1e-8
    assert b8[4] != b9[4] and float(b8[4]) == f16(float(b8[4]))  # float16-rounded, bitter9 not
    assert b9[:3].tolist() == pytest.approx(b7[:3].tolist(), rel=1e-4)  # large v: near


def test_bitter5_keeps_what_adam_moves_toward_zero_and_toward_zero_is_its_opposite():
    w, m, v = torch.tensor(W), torch.tensor(M), torch.tensor(V)
    toward = (torch.sign(w) * m) > 0  # Adam's update -m/sqrt(v) shrinks |w|
    high = S.bitter5(w, m, v) > 0.1 * w.abs() + 1e-3
    assert torch.equal(high, toward) and toward.any() and (~toward).any()
    movement = S.bitter5(w, m, v) - 0.1 * w.abs()
    assert (0.1 * w.abs() - S.toward_zero(w, m, v)).tolist() == pytest.approx(movement.tolist())


def test_variant_table_is_complete_and_returns_new_tensors():
    assert sorted(VARIANTS) == sorted([f"bitter{i}" for i in range(10)] + ["obd", "toward_zero"])
    for name, variant in VARIANTS.items():
        w = torch.tensor(W)
        out = variant.fn(w, torch.tensor(M), torch.tensor(V))
        assert out.data_ptr() != w.data_ptr() and torch.equal(w, torch.tensor(W)), name
        assert torch.isfinite(variant.fn(w, torch.zeros(5), torch.zeros(5))).all(), name


def test_magnitude_and_movement_increment():
    w = torch.tensor([-2.0, 0.5, 3.0])
    assert S.magnitude(w).tolist() == [2.0, 0.5, 3.0]
    grad = torch.tensor([1.0, -2.0, 0.5])
    assert S.movement_increment(w, grad).tolist() == [2.0, 1.0, -1.5]  # -(w * grad)


def test_depth_ramp_is_the_references_per_layer_sparsity():
    # min(0.95, s * (0.7 + 0.6 i / (L - 1))) for layer i of L.
    assert depth_ramp(5, 0.5) == pytest.approx([0.35, 0.425, 0.5, 0.575, 0.65])
    assert depth_ramp(4, 0.9) == pytest.approx([0.63, 0.81, 0.95, 0.95])  # 0.99, 1.17 capped
    assert depth_ramp(1, 0.5) == pytest.approx([0.35])  # a lone layer is "layer 0"
    assert depth_ramp(48, 0.0) == [0.0] * 48
    with pytest.raises(ValueError, match="n_layers"):
        depth_ramp(0, 0.5)


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
