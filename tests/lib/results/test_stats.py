"""Seed statistics against numbers worked out by hand (arithmetic in the comments)."""

from __future__ import annotations

import math

import pytest
from scipy import stats as st

from lib.results.stats import (
    MARKER,
    WILCOXON_MIN_N,
    Paired,
    format_mean_sd,
    format_p,
    format_paired,
    format_spread,
    group_by_config,
    marker,
    paired,
    seed_values,
    spread,
    spread_decimals,
)

T_975_2DOF = 4.302652729749464  # Student's t table: t_{0.975} with 2 degrees of freedom
EXACT = 1e-12


def test_spread_matches_hand_computed_mean_sd_and_t_interval():
    s = spread([2.0, 2.2, 2.7])
    # mean = 6.9 / 3 = 2.3; deviations -0.3, -0.1, 0.4; squares 0.09 + 0.01 + 0.16 = 0.26
    # sd = sqrt(0.26 / (3 - 1)) = sqrt(0.13) = 0.36056
    # half-width = 4.302652729749464 * 0.36056 / sqrt(3) = 0.89567
    assert (s.n, s.missing, s.note) == (3, 0, "")
    assert s.mean == pytest.approx(2.3, rel=EXACT)
    assert s.sd == pytest.approx(math.sqrt(0.13), rel=EXACT)
    assert s.half_width == pytest.approx(T_975_2DOF * math.sqrt(0.13) / math.sqrt(3), rel=1e-9)
    assert s.half_width == pytest.approx(0.8956686, abs=1e-7)
    assert (s.min, s.max) == (2.0, 2.7)
    assert s.ci_low == pytest.approx(2.3 - 0.8956686, abs=1e-7)
    assert s.ci_high == pytest.approx(2.3 + 0.8956686, abs=1e-7)
    assert format_spread(s, ".2f") == "2.30 ± 0.36 (n=3)"


def test_failed_seeds_are_left_out_and_counted():
    s = spread([2.0, None, 2.2, float("nan"), 2.7, float("inf")])
    # the same three values as above; None, NaN and inf are the 3 failed seeds
    assert (s.n, s.missing) == (3, 3)
    assert s.mean == pytest.approx(2.3, rel=EXACT)
    assert s.sd == pytest.approx(math.sqrt(0.13), rel=EXACT)
    assert format_spread(s, ".2f") == "2.30 ± 0.36 (n=3, 3 failed)"


def test_one_seed_has_no_spread_rather_than_zero():
    s = spread([3.25, None])
    assert (s.n, s.mean, s.min, s.max, s.missing) == (1, 3.25, 3.25, 3.25, 1)
    assert s.sd is None and s.half_width is None
    assert s.ci_low is None and s.ci_high is None
    assert "one seed" in s.note
    assert format_spread(s, ".2f") == "3.25 (1 seed, 1 failed)"
    assert format_spread(spread([3.25]), ".2f") == "3.25 (1 seed)"


def test_no_successful_seed_gives_no_numbers():
    s = spread([None, float("nan")])
    assert (s.n, s.mean, s.sd, s.min, s.missing) == (0, None, None, None, 2)
    assert format_spread(s) == "- (2 failed)"
    assert format_spread(spread([])) == "-"


def test_two_seeds_use_the_t_quantile_for_one_degree_of_freedom():
    s = spread([1.0, 3.0])
    # mean 2, sd = sqrt((1 + 1) / 1) = sqrt(2); t_{0.975, 1} = 12.706204736174707 (table)
    # half-width = 12.7062 * sqrt(2) / sqrt(2) = 12.7062
    assert s.sd == pytest.approx(math.sqrt(2), rel=EXACT)
    assert s.half_width == pytest.approx(12.706204736174707, rel=1e-9)


def test_paired_uses_only_shared_seeds_when_seed_counts_differ():
    baseline = {1: 3.0, 2: 3.4, 3: 3.1, 4: 3.9}  # four seeds
    other = {1: 2.8, 2: 3.3, 3: 2.8, 5: 3.0}  # three shared, one of its own
    d = paired(baseline, other)
    # differences other - baseline: -0.2, -0.1, -0.3; mean -0.2
    # sd = sqrt((0 + 0.01 + 0.01) / 2) = 0.1; half-width = 4.30265 * 0.1 / sqrt(3) = 0.24841
    assert (d.n, d.seeds, d.only_baseline, d.only_other, d.dropped) == (
        3,
        (1, 2, 3),
        (4,),
        (5,),
        (4, 5),
    )
    assert d.diff == pytest.approx(-0.2, rel=1e-12)
    assert d.half_width == pytest.approx(T_975_2DOF * 0.1 / math.sqrt(3), rel=1e-9)
    assert d.ci_low == pytest.approx(-0.4484138, abs=1e-7)
    assert d.ci_high == pytest.approx(0.0484138, abs=1e-7)
    # t = -0.2 / (0.1 / sqrt(3)) = -sqrt(12); with 2 dof the t tail has a closed form,
    # P(T > t) = (1 - t / sqrt(t^2 + 2)) / 2, so two-sided p = 1 - sqrt(12 / 14) = 0.074180
    assert d.p_t == pytest.approx(1 - math.sqrt(12 / 14), rel=1e-9)
    assert not d.excludes_zero and marker(d) == ""
    assert d.p_wilcoxon is None and "Wilcoxon" in d.note
    assert format_paired(d, ".2f") == "-0.20 [-0.45, +0.05] (n=3, p=0.074)"


def test_scipy_t_test_p_value_matches_the_t_statistic_by_hand():
    baseline = {1: 3.0, 2: 3.0, 3: 3.0, 4: 3.0}
    other = {1: 2.9, 2: 2.6, 3: 3.2, 4: 2.7}
    d = paired(baseline, other)
    diffs = [other[s] - baseline[s] for s in (1, 2, 3, 4)]  # -0.1, -0.4, 0.2, -0.3
    mean = sum(diffs) / 4  # -0.15
    sd = math.sqrt(sum((x - mean) ** 2 for x in diffs) / 3)  # sqrt(0.21 / 3)
    t = mean / (sd / math.sqrt(4))
    assert mean == pytest.approx(-0.15, rel=1e-12)
    assert sd == pytest.approx(math.sqrt(0.07), rel=1e-12)
    assert d.p_t == pytest.approx(2 * st.t.sf(abs(t), 3), rel=1e-9)
    assert d.half_width == pytest.approx(st.t.ppf(0.975, 3) * sd / 2, rel=1e-9)


def test_interval_excluding_zero_gets_the_marker():
    d = paired({1: 3.0, 2: 3.0, 3: 3.0}, {1: 2.8, 2: 2.75, 3: 2.7})
    # differences -0.2, -0.25, -0.3: mean -0.25, sd 0.05, half-width 4.30265 * 0.05 / sqrt(3)
    # = 0.12421, so the interval [-0.3742, -0.1258] lies below zero
    assert d.diff == pytest.approx(-0.25, rel=1e-12)
    assert d.ci_high == pytest.approx(-0.25 + T_975_2DOF * 0.05 / math.sqrt(3), rel=1e-9)
    # t = 0.25 / (0.05 / sqrt(3)) = 5 sqrt(3), t^2 = 75: p = 1 - sqrt(75 / 77) = 0.013072
    assert d.p_t == pytest.approx(1 - math.sqrt(75 / 77), rel=1e-9)
    assert d.excludes_zero and marker(d) == MARKER
    assert format_paired(d, ".2f") == f"-0.25 [-0.37, -0.13] (n=3, p=0.013) {MARKER}"
    assert format_paired(d, ".2f", p_values=False) == f"-0.25 [-0.37, -0.13] (n=3) {MARKER}"


def test_a_failed_seed_on_one_side_is_dropped_from_the_pairs():
    d = paired({1: 3.0, 2: 3.4, 3: 3.1}, {1: 2.8, 2: float("nan"), 3: 2.8, 4: None})
    # seed 2 failed in other; seed 4 failed and baseline never ran it
    assert (d.n, d.seeds, d.only_baseline, d.only_other) == (2, (1, 3), (2,), ())
    # differences -0.2, -0.3: mean -0.25, sd = sqrt(0.05^2 * 2 / 1) = 0.070711
    # t_{0.975, 1} = 12.706205 (table): half-width = 12.706205 * 0.070711 / sqrt(2) = 0.63531
    assert d.diff == pytest.approx(-0.25, rel=1e-12)
    assert d.half_width == pytest.approx(12.706204736174707 * 0.05, rel=1e-9)
    assert not d.excludes_zero


def test_one_shared_seed_gives_the_difference_only():
    d = paired({1: 3.0, 2: 3.5}, {2: 3.25, 3: 3.0})
    assert (d.n, d.seeds, d.only_baseline, d.only_other) == (1, (2,), (1,), (3,))
    assert d.diff == -0.25
    assert (d.half_width, d.p_t, d.p_wilcoxon, d.ci_low) == (None, None, None, None)
    assert not d.excludes_zero and "one shared seed" in d.note
    assert format_paired(d, ".2f") == "-0.25 (1 shared seed)"


def test_no_shared_seed_gives_no_difference():
    d = paired({1: 3.0}, {2: 3.0})
    assert (d.n, d.diff, d.dropped, d.note) == (0, None, (1, 2), "no shared seed")
    assert format_paired(d) == "-"


def test_wilcoxon_threshold_is_the_smallest_n_where_p_below_005_exists():
    # exact two-sided test: smallest p = 2 / 2^n (all signs equal, either way)
    assert 2 / 2 ** (WILCOXON_MIN_N - 1) >= 0.05  # n = 5: 0.0625
    assert 2 / 2**WILCOXON_MIN_N < 0.05  # n = 6: 0.03125
    # scipy agrees at the boundary, for the most extreme data possible
    assert st.wilcoxon([1.0, 2.0, 3.0, 4.0, 5.0]).pvalue == pytest.approx(2 / 32, rel=EXACT)
    assert st.wilcoxon([1.0, 2.0, 3.0, 4.0, 5.0, 6.0]).pvalue == pytest.approx(2 / 64, rel=EXACT)


def _six_seeds(diffs: list[float]) -> Paired:
    return paired(
        {s: 3.0 for s in range(1, len(diffs) + 1)},
        {s: 3.0 + x for s, x in enumerate(diffs, start=1)},
    )


def test_wilcoxon_p_from_six_non_zero_differences():
    d = _six_seeds([-0.6, -0.5, -0.4, -0.3, -0.2, 0.125])
    # ranks of |d|: 0.125 -> 1, 0.2 -> 2, ..., 0.6 -> 6; W+ = 1. Sign patterns with W+ <= 1:
    # {} and {1}, 2 of 64; two-sided p = 2 * 2 / 64 = 0.0625
    assert d.p_wilcoxon == pytest.approx(4 / 64, rel=EXACT)
    assert _six_seeds([-0.6, -0.5, -0.4, -0.3, -0.2, -0.125]).p_wilcoxon == pytest.approx(
        2 / 64, rel=EXACT
    )
    five = _six_seeds([-0.6, -0.5, -0.4, -0.3, -0.2])
    assert five.p_wilcoxon is None and "needs 6 non-zero differences, has 5" in five.note
    assert five.p_t is not None


def test_zero_differences_do_not_count_toward_the_wilcoxon_n():
    d = _six_seeds([-0.6, -0.5, -0.4, -0.3, -0.2, 0.0])
    assert d.n == 6 and d.p_wilcoxon is None and "has 5" in d.note


def test_equal_differences_have_a_zero_width_interval():
    d = paired({1: 1.0, 2: 2.0}, {1: 1.5, 2: 2.5})
    assert (d.diff, d.half_width, d.p_t, d.excludes_zero) == (0.5, 0.0, 0.0, True)
    same = paired({1: 1.0, 2: 2.0}, {1: 1.0, 2: 2.0})  # e.g. a run compared with itself
    assert (same.diff, same.half_width, same.p_t, same.excludes_zero) == (0.0, 0.0, None, False)
    assert "zero" in same.note


def test_group_by_config_keeps_first_seen_order_and_unequal_seeds():
    rows = [("adamw", 2, "a2"), ("muon", 1, "m1"), ("adamw", 1, "a1"), ("adamw", 3, "a3")]
    groups = group_by_config(rows, key=lambda r: r[0], seed=lambda r: r[1])
    assert list(groups) == ["adamw", "muon"]
    assert {k: {s: r[2] for s, r in g.items()} for k, g in groups.items()} == {
        "adamw": {2: "a2", 1: "a1", 3: "a3"},
        "muon": {1: "m1"},
    }
    ppl = {"a1": 30.0, "a2": 31.0, "a3": None, "m1": 29.5}
    assert seed_values(groups["adamw"], lambda r: ppl[r[2]]) == {2: 31.0, 1: 30.0, 3: None}


def test_group_by_config_rejects_a_repeated_seed_naming_both_rows():
    rows = [("adamw", 1, "run-a"), ("adamw", 1, "run-b")]
    with pytest.raises(ValueError, match=r"run-a and run-b .*'adamw'.* seed 1"):
        group_by_config(rows, key=lambda r: r[0], seed=lambda r: r[1], name=lambda r: r[2])


def test_format_helpers_for_tables():
    assert format_p(0.0004) == "<0.001" and format_p(0.0313) == "0.031"
    # differences 10, 10.1, 9.9: t = 10 / (0.1 / sqrt(3)) = 173.2, p = 1 - sqrt(t^2 / (t^2 + 2))
    # = 3.3e-5, written "p<0.001" rather than "p=<0.001"
    tiny = paired({1: 0.0, 2: 0.0, 3: 0.0}, {1: 10.0, 2: 10.1, 3: 9.9})
    assert tiny.p_t == pytest.approx(1 - math.sqrt(30000 / 30002), rel=1e-6)
    assert format_paired(tiny, ".2f") == f"+10.00 [+9.75, +10.25] (n=3, p<0.001) {MARKER}"
    assert format_spread(spread([2.0, 2.2, 2.7]), ".1f", pm=r"$\pm$") == r"2.3 $\pm$ 0.4 (n=3)"
    d = _six_seeds([-0.6, -0.5, -0.4, -0.3, -0.2, -0.125])
    # mean -(0.6 + 0.5 + 0.4 + 0.3 + 0.2 + 0.125) / 6 = -0.354; Wilcoxon 2 / 64 = 0.031
    assert format_paired(d, ".2f") == (
        f"-0.35 [-0.54, -0.16] (n=6, p=0.0049, Wilcoxon p=0.031) {MARKER}"
    )


def test_mean_is_given_to_the_spreads_two_significant_digits():
    # sd 159.27: two significant digits are 160, the tens; the mean 13187.41 to the tens
    assert spread_decimals(159.27) == -1
    assert format_mean_sd(13187.41, 159.27) == "13190 ± 160"
    assert format_mean_sd(100.6667, 3.055) == "100.7 ± 3.1"  # tenths
    assert format_mean_sd(4.6118, 0.0301, ".3f") == "4.612 ± 0.030"  # thousandths, zero kept
    # 0.0996 rounds to 0.10: the rounding made a digit, so hundredths, not thousandths
    assert spread_decimals(0.0996) == 2 and format_mean_sd(2.30456, 0.0996) == "2.30 ± 0.10"
    assert format_mean_sd(12345.6, 1234.0, ",.0f") == "12,300 ± 1,200"  # the column's commas
    assert format_mean_sd(-0.001, 0.5) == "0.00 ± 0.50"  # no "-0.00"
    # no spread to go by: the column's format
    assert format_mean_sd(5.0, 0.0) == "5.00 ± 0.00"
    assert format_mean_sd(5.0, None, ".1f") == "5.0"


def test_paired_difference_to_the_intervals_digits():
    d = Paired(3, 1882.88, 735.2, 0.0081, None, True, (1, 2, 3))
    # half-width 735.2: two significant digits are the tens
    assert format_paired(d, ".2f", from_interval=True) == "+1880 [+1150, +2620] (n=3, p=0.0081) *"
    assert format_paired(d, ".2f") == "+1882.88 [+1147.68, +2618.08] (n=3, p=0.0081) *"
