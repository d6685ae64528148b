"""Seed statistics: the spread of one configuration over its seeds, and a
paired comparison of two configurations over the seeds both have.

Pure functions on numbers (scipy.stats for the distributions); `make results`
groups its rows with group_by_config, reads a value per seed with seed_values,
and prints spread/paired results with format_spread/format_paired.

A seed whose value is None, NaN or infinite is a failed seed: it is left out
of every statistic and counted, so a table can say so instead of hiding it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from scipy import stats as st

R = TypeVar("R")
K = TypeVar("K", bound=Hashable)

CONFIDENCE = 0.95
# The exact two-sided Wilcoxon signed-rank test on n non-zero differences has
# 2**n equally likely sign patterns under the null; the most extreme one (all
# differences of one sign) occurs twice of them (all + or all -), so the
# smallest p-value possible is 2 / 2**n. That is below 0.05 only from n = 6
# (2/64 = 0.031; n = 5 gives 2/32 = 0.0625). With fewer non-zero differences
# the test cannot reject anything, so we do not print a p-value for it.
WILCOXON_MIN_N = 6
MARKER = "*"  # after a paired difference whose 95 % interval excludes zero


def _finite(value: float | None) -> float | None:
    if value is None:
        return None
    x = float(value)
    return x if math.isfinite(x) else None


def _t_half_width(sd: float, n: int) -> float:
    """Half-width of the two-sided t interval: t_{0.975, n-1} * sd / sqrt(n)."""
    return float(st.t.ppf(0.5 + CONFIDENCE / 2, n - 1)) * sd / math.sqrt(n)


@dataclass(frozen=True)
class Spread:
    """One configuration over its seeds. sd and half_width are None below two
    seeds (one seed has no spread; it is not zero); mean, min and max are None
    when no seed succeeded. missing counts the failed seeds left out."""

    n: int
    mean: float | None
    sd: float | None  # sample standard deviation (ddof=1)
    half_width: float | None  # of the 95 % t confidence interval of the mean
    min: float | None
    max: float | None
    missing: int = 0
    note: str = ""

    @property
    def ci_low(self) -> float | None:
        return None if self.mean is None or self.half_width is None else self.mean - self.half_width

    @property
    def ci_high(self) -> float | None:
        return None if self.mean is None or self.half_width is None else self.mean + self.half_width


def spread(values: Iterable[float | None]) -> Spread:
    """Mean, sample sd, 95 % t interval, min and max of the finite values."""
    given = [_finite(v) for v in values]
    xs = [x for x in given if x is not None]
    n, missing = len(xs), len(given) - len(xs)
    if n == 0:
        return Spread(0, None, None, None, None, None, missing, "no successful seed")
    mean = math.fsum(xs) / n
    if n == 1:
        return Spread(1, mean, None, None, xs[0], xs[0], missing, "one seed: no spread")
    sd = math.sqrt(math.fsum((x - mean) ** 2 for x in xs) / (n - 1))
    return Spread(n, mean, sd, _t_half_width(sd, n), min(xs), max(xs), missing)


@dataclass(frozen=True)
class Paired:
    """other - baseline over the seeds both have. half_width, p_t and
    p_wilcoxon are None when they cannot be computed (note says why);
    only_baseline/only_other are the seeds dropped because one side lacks a
    finite value there."""

    n: int
    diff: float | None  # mean paired difference, other - baseline
    half_width: float | None  # of its 95 % t interval
    p_t: float | None  # paired t-test, two-sided (scipy.stats.ttest_rel)
    p_wilcoxon: float | None  # Wilcoxon signed-rank, two-sided, when n allows
    excludes_zero: bool
    seeds: tuple[int, ...]
    only_baseline: tuple[int, ...] = ()
    only_other: tuple[int, ...] = ()
    note: str = ""

    @property
    def ci_low(self) -> float | None:
        return None if self.diff is None or self.half_width is None else self.diff - self.half_width

    @property
    def ci_high(self) -> float | None:
        return None if self.diff is None or self.half_width is None else self.diff + self.half_width

    @property
    def dropped(self) -> tuple[int, ...]:
        return tuple(sorted(self.only_baseline + self.only_other))


def _p_t(
    diffs: list[float], baseline: list[float], other: list[float], sd: float
) -> tuple[float | None, str]:
    if sd == 0.0:
        # scipy gives t = +-inf (p = 0) or NaN here, with a warning; say it plainly.
        if all(d == 0.0 for d in diffs):
            return None, "all differences are zero: no test"
        return 0.0, "all differences are equal: t is infinite"
    return float(st.ttest_rel(other, baseline).pvalue), ""


def _p_wilcoxon(diffs: list[float]) -> tuple[float | None, str]:
    nonzero = sum(1 for d in diffs if d != 0.0)  # scipy's default drops zeros
    if nonzero < WILCOXON_MIN_N:
        return None, f"Wilcoxon needs {WILCOXON_MIN_N} non-zero differences, has {nonzero}"
    return float(st.wilcoxon(diffs).pvalue), ""


def paired(baseline: Mapping[int, float | None], other: Mapping[int, float | None]) -> Paired:
    """Compare other with baseline seed by seed (seed -> value)."""
    base = {s: x for s, v in baseline.items() if (x := _finite(v)) is not None}
    oth = {s: x for s, v in other.items() if (x := _finite(v)) is not None}
    seeds = tuple(sorted(base.keys() & oth.keys()))
    only_b = tuple(sorted(base.keys() - oth.keys()))
    only_o = tuple(sorted(oth.keys() - base.keys()))
    b, o = [base[s] for s in seeds], [oth[s] for s in seeds]
    diffs = [y - x for x, y in zip(b, o)]
    d = spread(diffs)
    if d.n < 2:
        why = "no shared seed" if d.n == 0 else "one shared seed: no interval or test"
        return Paired(d.n, d.mean, None, None, None, False, seeds, only_b, only_o, why)
    assert d.mean is not None and d.sd is not None and d.half_width is not None
    p_t, note_t = _p_t(diffs, b, o, d.sd)
    p_w, note_w = _p_wilcoxon(diffs)
    excludes = d.mean - d.half_width > 0.0 or d.mean + d.half_width < 0.0
    note = "; ".join(x for x in (note_t, note_w) if x)
    return Paired(d.n, d.mean, d.half_width, p_t, p_w, excludes, seeds, only_b, only_o, note)


def group_by_config(
    rows: Iterable[R],
    key: Callable[[R], K],
    seed: Callable[[R], int],
    name: Callable[[R], str] = repr,
) -> dict[K, dict[int, R]]:
    """{configuration: {seed: row}} in first-seen order. key(row) is the
    configuration without its seed; two rows with the same key and seed are an
    error naming both (by name(row), e.g. the run id)."""
    groups: dict[K, dict[int, R]] = {}
    for row in rows:
        k, s = key(row), seed(row)
        group = groups.setdefault(k, {})
        if s in group:
            raise ValueError(
                f"{name(group[s])} and {name(row)} are the same configuration "
                f"{k!r} with the same seed {s}"
            )
        group[s] = row
    return groups


def seed_values(
    group: Mapping[int, R], value: Callable[[R], float | None]
) -> dict[int, float | None]:
    """{seed: value(row)} of one configuration's group, for spread and paired."""
    return {s: value(row) for s, row in group.items()}


def format_p(p: float) -> str:
    return "<0.001" if p < 0.001 else f"{p:.2g}"


def _relation(p: float) -> str:
    """ "=0.013" or "<0.001", to follow "p"."""
    text = format_p(p)
    return text if text.startswith("<") else "=" + text


SPREAD_DIGITS = 2  # significant digits of a spread; the mean is given to the same place


def spread_decimals(sd: float, digits: int = SPREAD_DIGITS) -> int:
    """The decimal place (as round() takes it: 1 for tenths, -1 for tens) of the
    last of `digits` significant digits of sd, after rounding: 159.27 -> -1
    (160), 0.0996 -> 2 (0.10, not 0.100)."""
    place = digits - 1 - math.floor(math.log10(sd))
    if abs(round(sd, place)) >= 10 ** (digits - place):  # rounding added a digit
        place -= 1
    return place


def format_mean_sd(mean: float, sd: float | None, spec: str = ".2f", pm: str = "±") -> str:
    """ "13190 ± 160" for 13187.41 ± 159.27: sd to two significant digits, the
    mean to the same decimal place, since the spread leaves the digits after it
    unsupported. Without a usable sd (None, zero, not finite) the mean and sd
    are formatted with spec. A "," in spec keeps the thousands separators."""
    if sd is None or not math.isfinite(sd) or sd <= 0 or not math.isfinite(mean):
        return f"{mean:{spec}}" if sd is None else f"{mean:{spec}} {pm} {sd:{spec}}"
    place = spread_decimals(sd)
    comma = "," if "," in spec else ""
    decimals = max(place, 0)
    return (
        f"{round(mean, place) + 0.0:{comma}.{decimals}f} {pm} "  # + 0.0: no "-0"
        f"{round(sd, place):{comma}.{decimals}f}"
    )


def format_spread(s: Spread, spec: str = ".3g", pm: str = "±") -> str:
    """ "2.30 ± 0.36 (n=3)": mean ± sample sd; "2.30 (1 seed)" for one seed;
    failed seeds appended ("n=2, 1 failed"); "-" when no seed succeeded.
    pm is the plus-minus sign (LaTeX: r"$\\pm$")."""
    failed = f"{s.missing} failed" if s.missing else ""
    if s.mean is None:
        return f"- ({failed})" if failed else "-"
    if s.sd is None:
        return f"{s.mean:{spec}} ({', '.join(x for x in ('1 seed', failed) if x)})"
    return f"{s.mean:{spec}} {pm} {s.sd:{spec}} ({', '.join(x for x in (f'n={s.n}', failed) if x)})"


def _signed(x: float, spec: str) -> str:
    text = format(x, spec)
    return text if text.startswith(("-", "+")) else "+" + text


def marker(d: Paired) -> str:
    """MARKER when the paired difference's 95 % interval excludes zero, else ""."""
    return MARKER if d.excludes_zero else ""


def format_paired(
    d: Paired, spec: str = ".3g", p_values: bool = True, from_interval: bool = False
) -> str:
    """ "-0.25 [-0.37, -0.13] (n=3, p=0.0013) *": mean difference, its 95 %
    interval, the paired t-test p (and Wilcoxon's when n allows), MARKER when
    the interval excludes zero; "+0.1 (1 shared seed)"; "-" without a shared seed.
    from_interval: the numbers to the decimal place of the half-width's two
    significant digits (+1882.88 [+1147.69, +2618.08] -> +1880 [+1150, +2620])."""
    if d.diff is None:
        return "-"
    if d.half_width is None:
        return f"{_signed(d.diff, spec)} (1 shared seed)"
    assert d.ci_low is not None and d.ci_high is not None
    mid, low, high = d.diff, d.ci_low, d.ci_high
    if from_interval and math.isfinite(d.half_width) and d.half_width > 0:
        place = spread_decimals(d.half_width)
        spec = f".{max(place, 0)}f"
        mid, low, high = (round(x, place) + 0.0 for x in (mid, low, high))
    parts = [f"n={d.n}"]
    if p_values and d.p_t is not None:
        parts.append(f"p{_relation(d.p_t)}")
    if p_values and d.p_wilcoxon is not None:
        parts.append(f"Wilcoxon p{_relation(d.p_wilcoxon)}")
    text = (
        f"{_signed(mid, spec)} [{_signed(low, spec)}, {_signed(high, spec)}] ({', '.join(parts)})"
    )
    return f"{text} {MARKER}" if d.excludes_zero else text
