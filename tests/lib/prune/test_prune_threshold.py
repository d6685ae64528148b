"""Sparsity schedule values; exact and sampled global thresholds."""

from __future__ import annotations

import math

import pytest
import torch

from lib.prune import threshold
from lib.prune.schedule import sparsity_at
from lib.prune.threshold import (
    dkw_bound,
    kth_smallest,
    kth_threshold,
    sample_entries,
    smallest_k,
    smallest_k_on_device,
)


@pytest.mark.parametrize(
    "step, linear, cubic, late",
    [
        (0, 0.0, 0.0, 0.0),
        (10, 0.0, 0.0, 0.0),
        # progress 0.25: 0.8 * 0.25; 0.8 * (1 - 0.75^3) = 0.8 * 0.578125; 0.8 * 0.25^3
        (15, 0.2, 0.4625, 0.0125),
        (20, 0.4, 0.7, 0.1),  # progress 0.5: 0.8 * 0.5; 0.8 * (1 - 0.125); 0.8 * 0.125
        (30, 0.8, 0.8, 0.8),
        (1000, 0.8, 0.8, 0.8),
    ],
)
def test_sparsity_at(step, linear, cubic, late):
    kw = dict(target=0.8, warmup=10, ramp_end=30)
    assert sparsity_at(step, kind="linear", **kw) == pytest.approx(linear)
    assert sparsity_at(step, kind="cubic", **kw) == pytest.approx(cubic)
    assert sparsity_at(step, kind="cubic_late", **kw) == pytest.approx(late)  # AdamWPrune's


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(target=1.0, warmup=0, ramp_end=5, kind="linear"), "target"),
        (dict(target=-0.1, warmup=0, ramp_end=5, kind="linear"), "target"),
        (dict(target=0.5, warmup=-1, ramp_end=5, kind="linear"), "warmup"),
        (dict(target=0.5, warmup=5, ramp_end=5, kind="linear"), "ramp_end"),
        (dict(target=0.5, warmup=0, ramp_end=5, kind="quadratic"), "kind"),
    ],
)
def test_sparsity_at_rejects_bad_arguments(kwargs, name):
    with pytest.raises(ValueError, match=name):
        sparsity_at(3, **kwargs)


def _tensors(seed=0):
    g = torch.Generator().manual_seed(seed)
    return [
        torch.randn(30, 40, generator=g),
        torch.rand(100, generator=g),
        torch.randn(7, 9, 11, generator=g) * 3,
    ]


def test_exact_threshold_is_the_sorted_quantile():
    scores = _tensors()
    flat = torch.cat([s.flatten() for s in scores])
    n = flat.numel()
    for fraction in (0.05, 0.3, 0.5, 0.97):
        k = round(fraction * n)
        t = kth_threshold(scores, fraction)
        assert t == float(flat.sort().values[k])
        assert t == float(torch.quantile(flat, k / (n - 1), interpolation="nearest"))
        assert int((flat < t).sum()) == k


def test_threshold_extremes_and_minus_inf():
    scores = _tensors()
    flat = torch.cat([s.flatten() for s in scores])
    assert kth_threshold(scores, 0.0) == -torch.finfo(torch.float32).max
    assert kth_threshold(scores, 1.0) == math.inf
    pruned = [s.masked_fill(s.abs() < 0.3, -math.inf) for s in scores]  # "already pruned"
    flat_p = torch.cat([s.flatten() for s in pruned])
    n_inf = int(torch.isinf(flat_p).sum())
    assert 0 < n_inf < 0.5 * flat.numel()
    t = kth_threshold(pruned, 0.01)  # below the pruned fraction: pruned entries still count
    assert int((flat_p < t).sum()) == n_inf
    t = kth_threshold(pruned, 0.6)
    assert int((flat_p < t).sum()) == round(0.6 * flat.numel())


def test_dkw_bound_value_and_arguments():
    assert dkw_bound(20_000, 1e-3) == pytest.approx(math.sqrt(math.log(2000) / 40_000))
    assert dkw_bound(20_000, 1e-3) == pytest.approx(0.013785, rel=1e-4)
    with pytest.raises(ValueError, match="delta"):
        dkw_bound(10, 0.0)
    with pytest.raises(ValueError, match="n="):
        dkw_bound(0, 0.1)


def test_sampling_is_proportional_to_tensor_size():
    g = torch.Generator().manual_seed(1)
    sample = sample_entries([torch.zeros(1000), torch.ones(3000)], 40_000, g)
    assert sample.numel() == 40_000 and float(sample.mean()) == pytest.approx(0.75, abs=0.02)


def test_sampled_threshold_is_within_the_dkw_bound():
    g = torch.Generator().manual_seed(0)
    scores = [
        torch.randn(2_000_000, generator=g),
        torch.rand(700, 1000, generator=g) * 2,
        -torch.empty(300_000).exponential_(generator=g),
    ]
    scores[0][:100_000] = -math.inf  # already pruned entries
    total = sum(s.numel() for s in scores)
    n = 20_000
    bound = dkw_bound(n, 1e-3) + 1 / (2 * n)  # + rounding of the sample rank
    worst = 0.0
    for seed in range(5):
        for fraction in (0.1, 0.5, 0.9):
            gen = torch.Generator().manual_seed(seed)
            t = kth_threshold(scores, fraction, sample_size=n, generator=gen)
            achieved = sum(int((s < t).sum()) for s in scores) / total
            worst = max(worst, abs(achieved - fraction))
    assert worst <= bound
    assert worst > 0  # the sampled path, not the exact one, was taken


@pytest.mark.parametrize("kind", ["distinct", "ties", "minus_inf"])
def test_banded_kth_smallest_is_exact(kind):
    g = torch.Generator().manual_seed(3)
    scores = [torch.randn(150_000, generator=g), torch.randn(300, 200, generator=g)]
    if kind == "ties":
        scores = [torch.randint(0, 40, s.shape, generator=g).float() for s in scores]
    if kind == "minus_inf":
        scores[1][:100] = -math.inf
    ordered = torch.cat([s.flatten() for s in scores]).sort().values
    n = ordered.numel()
    for k in (1, 500, 6_000, n // 2, n - 7, n):
        gen = torch.Generator().manual_seed(k)
        assert kth_smallest(scores, k, sample_size=5_000, generator=gen) == float(ordered[k - 1])


def test_smallest_k_selects_exactly_k_with_ties_by_position():
    scores = [torch.ones(2, 3), torch.ones(4)]
    chosen = smallest_k(scores, 4)
    assert chosen[0].tolist() == [[True, True, True], [True, False, False]]
    assert chosen[1].tolist() == [False] * 4
    scores = [torch.tensor([5.0, -math.inf, 1.0, 1.0]), torch.tensor([1.0, 0.0])]
    chosen = smallest_k(scores, 3)
    assert chosen[0].tolist() == [False, True, True, False] and chosen[1].tolist() == [False, True]
    big = [torch.randint(0, 3, (50_000,)).float(), torch.randint(0, 3, (70_000,)).float()]
    for k in (0, 1, 33_333, 119_999, 120_000):
        assert sum(int(c.sum()) for c in smallest_k(big, k, sample_size=1_000)) == k


def host_smallest_k(scores, k):
    """The selection before it ran on the device: the k-th value read back, then the
    entries below it, then ties by position, one tensor at a time."""
    v = float(torch.kthvalue(torch.cat([s.reshape(-1) for s in scores]).float(), k).values)
    chosen = [s < v for s in scores]
    need = k - sum(int(c.sum()) for c in chosen)
    for s, c in zip(scores, chosen):
        ties = torch.nonzero((s == v).reshape(-1)).squeeze(1)[: max(need, 0)]
        c.view(-1)[ties] = True
        need -= ties.numel()
    return chosen


@pytest.mark.parametrize("kind", ["distinct", "ties", "pruned"])
def test_device_selection_matches_the_host_one(kind):
    g = torch.Generator().manual_seed(7)
    for trial in range(4):
        scores = [
            torch.randn(40, 30, generator=g),
            torch.randn(500, generator=g),
            torch.randn(3, 7, 11, generator=g),
        ]
        if kind == "ties":  # few distinct values: many ties at the k-th one
            scores = [torch.randint(0, 5, s.shape, generator=g).float() for s in scores]
        if kind == "pruned":  # already-pruned entries score -inf
            scores = [
                s.masked_fill(torch.rand(s.shape, generator=g) < 0.3, -math.inf) for s in scores
            ]
        total = sum(s.numel() for s in scores)
        for k in (1, 17, total // 3, total // 2 + trial, total - 1):
            want = host_smallest_k(scores, k)
            got = smallest_k_on_device(scores, k)
            assert sum(int(c.sum()) for c in got) == k
            for a, b in zip(got, want):
                assert a.shape == b.shape and torch.equal(a, b)
            # banded on the device: the same masks whatever the sample's size
            for size in (100, 1_000):
                gen = torch.Generator().manual_seed(k)
                banded = smallest_k_on_device(scores, k, sample_size=size, generator=gen)
                assert all(torch.equal(a, b) for a, b in zip(banded, want))
            # what the pruner calls: the same masks, below and above sample_size
            for size in (total, 100):
                again = smallest_k(
                    scores, k, sample_size=size, generator=torch.Generator().manual_seed(k)
                )
                assert all(torch.equal(a, b) for a, b in zip(again, want))


def test_device_selection_with_nan_marks_what_the_host_one_marks():
    scores = [torch.tensor([3.0, math.nan, 1.0, 2.0]), torch.tensor([math.nan, 0.5])]
    for k in range(1, 6):
        assert [c.tolist() for c in smallest_k_on_device(scores, k)] == [
            c.tolist() for c in host_smallest_k(scores, k)
        ]


@pytest.mark.parametrize("kind", ["distinct", "ties", "minus_inf", "nan"])
def test_banded_device_value_is_exact_and_selects_within_the_band(kind, monkeypatch):
    # Above sample_size the k-th value comes from the sampled band, sorted; torch.kthvalue
    # over everything (599 ms for GPT-2 124M's weights on an H200) runs only when the
    # bracket misses.
    g = torch.Generator().manual_seed(5)
    flat = torch.randn(200_000, generator=g)
    if kind == "ties":
        flat = torch.randint(0, 40, flat.shape, generator=g).float()
    if kind == "minus_inf":
        flat[:30_000] = -math.inf
    if kind == "nan":
        flat[-500:] = math.nan
    ordered = flat.sort().values  # NaN last, as torch.kthvalue orders it
    full = []
    kthvalue = torch.kthvalue

    def spy(t, *args, **kwargs):
        full.append(t.numel())
        return kthvalue(t, *args, **kwargs)

    monkeypatch.setattr(torch, "kthvalue", spy)
    for k in (1, 777, 29_999, 30_001, 100_000, 199_000) + ((199_999,) if kind != "nan" else ()):
        gen = torch.Generator().manual_seed(k)
        got = threshold.kth_value_banded(flat, k, 20_000, gen)
        assert got.dim() == 0 and torch.equal(got, ordered[k - 1]), k
    assert full == []  # every bracket held: the band, never everything, was selected in
    if kind == "nan":  # the k-th is NaN: no bracket holds it, kthvalue says NaN
        assert threshold.kth_value_banded(flat, 199_999, 20_000).isnan()


def test_banded_device_value_falls_back_when_the_bracket_misses(monkeypatch):
    # A bracket of no width misses almost always: the fallback must still be exact.
    monkeypatch.setattr(threshold, "BRACKET_DELTA", 1 - 1e-12)
    flat = torch.randn(50_000, generator=torch.Generator().manual_seed(2))
    ordered = flat.sort().values
    for k in (3, 12_345, 49_999):
        got = threshold.kth_value_banded(flat, k, 64, torch.Generator().manual_seed(k))
        assert torch.equal(got, ordered[k - 1])


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_banded_selection_on_cuda_marks_what_the_host_marks():
    g = torch.Generator().manual_seed(11)
    scores = [torch.randn(300, 1000, generator=g), torch.randint(0, 50, (400_000,), generator=g)]
    scores = [scores[0], scores[1].float()]  # ties in the second tensor
    total = sum(s.numel() for s in scores)
    for k in (1, 123_456, total // 2, total - 1):
        want = host_smallest_k(scores, k)
        got = smallest_k(
            [s.cuda() for s in scores], k, sample_size=50_000, generator=torch.Generator()
        )
        assert all(torch.equal(a.cpu(), b) for a, b in zip(got, want)), k
