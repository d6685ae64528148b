"""Sweeps over any Kconfig symbol: `make sweep SWEEP="LEARNING_RATE=1e-4,3e-4 BATCH_SIZE=16,32"`.

A sweep is a test matrix whose extra dimension is the sweep's points: grid
mode takes the product of the listed values; random mode draws SWEEP_TRIALS
points, each value from its list or from a range `lo..hi` (uniform) or
`lo..hi:log` (log-uniform) of a numeric symbol, in the grammar tuning reads
too (lib/tune/ranges.py), drawn as integers for an integer symbol, with a fixed
seed so a sweep is reproducible. A range's ends are checked against the
symbol's type and allowed range at once; every value is then checked against
them by the matrix's validation of each run, before anything trains. A sweep file
(`sweeps/<name>`) holds the same words, one per line, plus optional
SWEEP_MODE=, SWEEP_TRIALS= and SWEEP_SEED= lines, so a campaign is versioned.
A swept name that is no Kconfig symbol, choice, old name or command-line alias
is refused at once, with the symbol it most likely meant (and the file's line).
MATRIX_SEEDS trains every point once per seed, as it does a matrix's runs
(lib/matrix/grid.py); a sweep over TRAIN_SEED itself is then refused, since
both would set each run's seed. SWEEP_SEED only fixes random mode's draws.
Random mode draws with random.Random, not tuning's Optuna samplers: its draws
are the same independent uniform ones, and a sweep's seed keeps its points.
"""

from __future__ import annotations

import itertools
import random
import re
from dataclasses import dataclass, field
from pathlib import Path

from lib.config.kconfig import ConfigError, Numeric, clipped, closest_name
from lib.config.overrides import ALIASES
from lib.config.renames import current_name
from lib.paths import SWEEPS
from lib.tune.ranges import Range, RangeError, is_range, parse_range
from lib.tune.space import tree_symbols

_SETTINGS = ("SWEEP_MODE", "SWEEP_TRIALS", "SWEEP_SEED")


@dataclass(frozen=True)
class Param:
    symbol: str
    values: tuple[str, ...] = ()  # a list of values
    range: Range | None = None  # or a range (random mode only)

    def draw(self, rng: random.Random) -> str:
        if self.range is None:
            return rng.choice(self.values)
        # one rng.random() per draw, as rng.uniform took: a seed's points stay the same
        x = self.range.at(rng.random())
        return str(x) if self.range.integer else f"{x:.3g}"


@dataclass(frozen=True)
class Sweep:
    params: tuple[Param, ...]
    mode: str = "grid"
    trials: int = 0
    seed: int = 0
    source: str = ""
    notes: list[str] = field(default_factory=list)

    def points(self) -> list[list[tuple[str, str]]]:
        """The runs' overrides: the grid's product, or `trials` random draws
        (repeated points are drawn once)."""
        if self.mode == "grid":
            return [
                list(zip([p.symbol for p in self.params], values))
                for values in itertools.product(*[p.values for p in self.params])
            ]
        rng, seen, out = random.Random(self.seed), set(), []
        for _ in range(self.trials * 20):
            point = tuple((p.symbol, p.draw(rng)) for p in self.params)
            if point not in seen:
                seen.add(point)
                out.append(list(point))
            if len(out) == self.trials:
                break
        return out

    def record(self) -> dict:
        """What matrix.json keeps about the sweep (make results reads it)."""
        return {
            "mode": self.mode,
            "trials": self.trials,
            "seed": self.seed,
            "source": self.source,
            "params": [p.symbol for p in self.params],
            "log": [p.symbol for p in self.params if p.range is not None and p.range.log],
        }


def _split(word: str) -> tuple[str, str]:
    symbol, sep, spec = word.partition("=")
    if not sep or not re.fullmatch(r"[A-Z][A-Z0-9_]*", symbol) or not spec:
        raise ConfigError([f"sweep: '{word}' is not SYMBOL=v1,v2,... or SYMBOL=lo..hi[:log]"])
    return symbol, spec


def _param(symbol: str, spec: str, mode: str, sym: Numeric | None) -> Param:
    """One word's values or range; RangeError saying what is wrong with it.
    sym: the symbol's type and allowed range, None for a non-numeric one."""
    if sym is None:
        try:  # a string may hold ".." (a path): only a well-formed range is refused
            parse_range(spec)
        except RangeError:
            return Param(symbol, tuple(v for v in spec.split(",") if v))
        raise RangeError(
            "a range needs a numeric symbol (an int, or a float with an allowed range "
            "in its help), and this one is not; list its values instead: a,b,c"
        )
    if not is_range(spec):
        return Param(symbol, tuple(v for v in spec.split(",") if v))
    if mode != "random":
        raise RangeError("a range needs SWEEP_MODE=random (a grid needs listed values)")
    target = ALIASES.get(symbol, current_name(symbol.removeprefix("CONFIG_")))
    return Param(symbol, range=parse_range(spec, target, sym.integer, (sym.low, sym.high)))


def _where(symbol: str, source: str, lines: dict[str, int]) -> str:
    return f"{source}:{lines[symbol]}" if symbol in lines else source


def _check_names(
    symbols: list[str], source: str, lines: dict[str, int]
) -> dict[str, Numeric | None]:
    """Each swept name is one an override takes (lib/config/overrides.py), or a
    problem naming the closest that is: refused before any run is planned.
    Returns each name's numeric type (None: not numeric)."""
    numeric, other, choices = tree_symbols()
    known = [*ALIASES, *choices, *numeric, *other]
    problems, types = [], {}
    for symbol in symbols:
        name = symbol.removeprefix("CONFIG_")
        if name in known or current_name(name) in known:
            types[symbol] = numeric.get(ALIASES.get(name, current_name(name)))
            continue
        near = closest_name(name, known)
        problems.append(
            f"{_where(symbol, source, lines)}: {symbol} is not a Kconfig symbol or an alias; "
            + (
                f"did you mean {near}?"
                if near
                else "name a symbol as .config does, without CONFIG_ (e.g. LEARNING_RATE)"
            )
        )
    if problems:
        raise ConfigError(problems)
    return types


def parse(
    spec: str,
    mode: str = "grid",
    trials: int = 0,
    seed: int = 0,
    source: str = "SWEEP",
    lines: dict[str, int] | None = None,
) -> Sweep:
    """lines: the line of a sweep file each symbol is on, for messages."""
    if mode not in ("grid", "random"):
        raise ConfigError([f"SWEEP_MODE={mode}: allowed grid or random"])
    if mode == "random" and trials < 1:
        raise ConfigError(["SWEEP_MODE=random needs SWEEP_TRIALS=<number of runs, 1 or more>"])
    words = [_split(w) for w in spec.split()]
    if not words:
        raise ConfigError([f"{source} is empty: give SYMBOL=v1,v2 words"])
    names = [symbol for symbol, _ in words]
    if len(set(names)) != len(names):
        raise ConfigError([f"{source}: a symbol is listed twice ({', '.join(names)})"])
    types = _check_names(names, source, lines or {})
    params, problems = [], []
    for symbol, values in words:
        try:
            params.append(_param(symbol, values, mode, types[symbol]))
        except RangeError as err:  # every word's problem at once, as tuning reports them
            where = _where(symbol, source, lines or {})
            problems.append(f"{where}: {symbol}={clipped(values)}: {err}")
    if problems:
        raise ConfigError(problems)
    return Sweep(tuple(params), mode, trials, seed, source)


def from_file(name: str) -> Sweep:
    """sweeps/<name> (or a path): sweep words and SWEEP_* settings, # comments."""
    path = Path(name) if "/" in name else SWEEPS / name
    if not path.is_file():
        known = ", ".join(sorted(p.name for p in SWEEPS.iterdir())) if SWEEPS.is_dir() else ""
        raise ConfigError([f"no sweep file {path}" + (f"; known: {known}" if known else "")])
    words, settings = [], {"SWEEP_MODE": "grid", "SWEEP_TRIALS": "0", "SWEEP_SEED": "0"}
    lines: dict[str, int] = {}
    for no, line in enumerate(path.read_text().splitlines(), 1):
        for word in line.split("#", 1)[0].split():
            key = word.partition("=")[0]
            if key in _SETTINGS:
                settings[key] = word.partition("=")[2]
            else:
                words.append(word)
                lines.setdefault(key, no)
    try:
        trials, seed = int(settings["SWEEP_TRIALS"]), int(settings["SWEEP_SEED"])
    except ValueError:
        raise ConfigError([f"{path}: SWEEP_TRIALS and SWEEP_SEED must be integers"]) from None
    return parse(
        " ".join(words), settings["SWEEP_MODE"], trials, seed, source=str(path), lines=lines
    )
