"""What a tuning study searches: MATRIX_TUNE_SYMBOLS parsed into ranges.

Each word is a numeric symbol (int, hex, or a float string with "Allowed X to
Y" in its help) or a command-line alias for one (LR): bare, it searches /10 to
x10 of the configured value on a log scale, clipped to the symbol's own range;
`NAME=lo..hi` is a linear range, `NAME=lo..hi:log` a log one, in the grammar a
sweep reads too (lib/tune/ranges.py). Every problem is reported before anything
runs, with the name a misspelt one most likely meant.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lib.config.kconfig import ConfigError, Numeric, clipped, closest_name, numeric_symbols
from lib.config.overrides import ALIASES
from lib.config.renames import current_name
from lib.tune.ranges import Range, RangeError, parse_range

if TYPE_CHECKING:
    from collections.abc import Mapping

# Not hyper-parameters: the trial's length is the budget, its seed is fixed.
_NOT_TUNED = {
    "GPT2_MAX_ITERS": "it is the budget (MATRIX_TUNE_FRACTION sets a trial's steps)",
    "TRAIN_SEED": "a seed is not a hyper-parameter (trials share one; MATRIX_SEEDS varies it)",
}
BARE_FACTOR = 10.0  # a bare name searches value / 10 .. value x 10
# Lengths that must fit in a trial (lib/train/rules.py refuses a warmup past the run's end).
_TRIAL_LENGTHS = ("GPT2_WARMUP_STEPS",)
EDGE = 0.05  # at_edge: within 5 % of the range's width (log width for log ranges)


@dataclass(frozen=True)
class Dimension:
    """One tuned symbol: its name as written (the override's name), its range."""

    name: str
    symbol: str
    low: float
    high: float
    log: bool
    integer: bool
    hex: bool = False

    def suggest(self, trial: Any) -> float | int:
        """The trial's value (an optuna Trial)."""
        if self.integer:
            return trial.suggest_int(self.name, int(self.low), int(self.high), log=self.log)
        return trial.suggest_float(self.name, self.low, self.high, log=self.log)

    def text(self, value: float) -> str:
        """The override's value: as Kconfig reads it."""
        if self.hex:
            return hex(int(value))
        return str(int(value)) if self.integer else f"{value:.6g}"

    def grid(self, points: int) -> list[float | int]:
        """`points` evenly spaced values, both ends included (log-spaced for log)."""
        if points == 1:
            return [self._scaled(0.5)]
        values = [self._scaled(i / (points - 1)) for i in range(points)]
        return list(dict.fromkeys(values))  # an int range narrower than the grid repeats

    def _scaled(self, u: float) -> float | int:
        x = Range(self.low, self.high, self.log, self.integer).at(u)
        return x if self.integer else float(f"{x:.6g}")

    def at_edge(self, value: float) -> bool:
        """Whether value lies within EDGE of either end (in log space for log ranges)."""
        f = math.log if self.log else float
        width = f(self.high) - f(self.low)
        return min(f(value) - f(self.low), f(self.high) - f(value)) <= EDGE * width

    def record(self) -> dict[str, Any]:
        return {"name": self.name, "low": self.low, "high": self.high, "log": self.log}


@functools.cache
def tree_symbols() -> tuple[dict[str, Numeric], set[str], set[str]]:
    """The tree's numeric symbols, other symbols and choices, read once per
    process for both searches (tuning and a sweep, lib/matrix/sweep.py)."""
    return numeric_symbols()


def _names(numeric: dict[str, Numeric]) -> list[str]:
    syms = [s for s in numeric if s not in _NOT_TUNED]
    return [*(a for a, s in ALIASES.items() if s in syms), *syms]


def _dimension(
    word: str, values: Mapping[str, Any], skip_hidden: bool, trial_steps: int | None = None
) -> Dimension | None:
    name, sep, spec = word.partition("=")
    where = f'CONFIG_MATRIX_TUNE_SYMBOLS: "{clipped(word)}"'
    symbol = ALIASES.get(name, current_name(name.removeprefix("CONFIG_")))
    numeric, other, choices = tree_symbols()
    sym = numeric.get(symbol)
    if symbol in choices or symbol in other:
        raise ValueError(
            f"{where}: {symbol} is not numeric (int, hex or float); tuning searches "
            f"numeric ranges, and a choice or text is compared as a matrix axis "
            f"(the multiple-selection menus, MATRIX_ABLATION)"
        )
    if sym is None:
        near = closest_name(name.upper(), _names(numeric))  # "lr" means LR
        switch = name.lower() in ("y", "n", "yes", "no", "1", "0", "on", "off")
        raise ValueError(
            f"{where}: {clipped(name)} is no Kconfig symbol or alias"
            + (f"; did you mean {near}?" if near else ".")
            + (" TUNE= names what to tune, not whether: e.g. TUNE=LR." if switch else "")
            + " Tuning takes numeric symbols, e.g. LR, GPT2_WARMUP_STEPS, WEIGHT_DECAY"
        )
    if symbol in _NOT_TUNED:
        raise ValueError(f"{where}: {symbol} is not tuned: {_NOT_TUNED[symbol]}")
    if symbol not in values:
        if skip_hidden:  # e.g. SPAM_THETA in a matrix's AdamW configuration
            return None
        raise ValueError(
            f"{where}: CONFIG_{symbol} is hidden in this configuration (its dependencies "
            f"are off), so a trial could not set it"
        )
    integer, allowed = sym.integer, (sym.low, sym.high)
    if not sep:  # a bare name: a log range around the configured value
        current = float(values[symbol])
        if current <= 0:
            raise ValueError(
                f"{where}: CONFIG_{symbol} is {values[symbol]}, so no range around it "
                f"can be a log range; give one, e.g. {name}=lo..hi"
            )
        low = max(current / BARE_FACTOR, allowed[0])
        high = min(current * BARE_FACTOR, allowed[1])
        if symbol in _TRIAL_LENGTHS and trial_steps is not None:
            high = min(high, trial_steps)  # a longer one would be refused in every trial
        if integer:
            low, high = max(math.ceil(low), 1), math.floor(high)
        return Dimension(name, symbol, low, high, True, integer, sym.hex)
    try:
        given = parse_range(spec, symbol, integer, allowed)
    except RangeError as err:
        raise ValueError(f"{where}: {err}") from None
    low, high, log = given.low, given.high, given.log
    if symbol in _TRIAL_LENGTHS and trial_steps is not None and high > trial_steps:
        raise ValueError(
            f"{where}: a trial trains {trial_steps} steps and CONFIG_{symbol} must fit in "
            f"it; keep the range's high end at {trial_steps} or below (or raise TUNE_FRACTION)"
        )
    return Dimension(name, symbol, low, high, log, integer, sym.hex)


def parse(
    text: str,
    values: Mapping[str, Any],
    skip_hidden: bool = False,
    trial_steps: int | None = None,
) -> list[Dimension]:
    """MATRIX_TUNE_SYMBOLS -> its dimensions; ConfigError listing every problem.
    values: the configuration's active symbols (RunConfig.values); skip_hidden
    leaves out the symbols hidden there (one configuration of a matrix);
    trial_steps: a trial's length, which a tuned warmup must fit in."""
    dims, problems = [], []
    for word in text.split():
        try:
            dim = _dimension(word, values, skip_hidden, trial_steps)
        except ValueError as err:
            problems.append(str(err))
            continue
        if dim is not None:
            dims.append(dim)
    symbols = [d.symbol for d in dims]
    twice = sorted({s for s in symbols if symbols.count(s) > 1})
    if twice:
        problems.append(
            f"CONFIG_MATRIX_TUNE_SYMBOLS: {', '.join(twice)} named twice; name each once"
        )
    if not text.split():
        problems.append(
            'CONFIG_MATRIX_TUNE_SYMBOLS is empty: name what to tune, e.g. "LR" '
            "(or turn MATRIX_TUNE off)"
        )
    if problems:
        raise ConfigError(problems, "tuning")
    return dims


def grid_points(dims: list[Dimension], trials: int) -> dict[str, list[float | int]]:
    """The grid sampler's space: k values per symbol, k**len(dims) <= trials."""
    k = max(1, int(round(trials ** (1 / len(dims)), 9)))
    while k ** len(dims) > trials:
        k -= 1
    return {d.name: d.grid(max(k, 1)) for d in dims}
