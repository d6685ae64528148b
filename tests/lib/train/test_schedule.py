"""Warmup then cosine decay, checked at known points."""
from __future__ import annotations

import math

import pytest

from lib.train.schedule import lr_at

KW = dict(peak=6e-4, minimum=6e-5, warmup=10, total=110)


def test_warmup_is_linear_from_the_first_step():
    assert lr_at(0, **KW) == pytest.approx(6e-5)
    assert lr_at(4, **KW) == pytest.approx(3e-4)
    assert lr_at(9, **KW) == pytest.approx(6e-4)


def test_cosine_reaches_midpoint_and_minimum():
    assert lr_at(10, **KW) == pytest.approx(6e-4)
    assert lr_at(60, **KW) == pytest.approx((6e-4 + 6e-5) / 2)
    quarter = 6e-5 + 0.5 * (1 + math.cos(math.pi * 0.25)) * (6e-4 - 6e-5)
    assert lr_at(35, **KW) == pytest.approx(quarter)
    assert lr_at(110, **KW) == lr_at(500, **KW) == 6e-5
