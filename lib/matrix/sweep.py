"""Sweeps over any Kconfig symbol: `make sweep SWEEP="LEARNING_RATE=1e-4,3e-4 BATCH_SIZE=16,32"`.

A sweep is a test matrix whose extra dimension is the sweep's points: grid
mode takes the product of the listed values; random mode draws SWEEP_TRIALS
points, each value from its list or from a range `lo..hi` (uniform) or
`lo..hi:log` (log-uniform), with a fixed seed so a sweep is reproducible.
Every value is then checked against the symbol's Kconfig type and range by
the matrix's validation of each run, before anything trains. A sweep file
(`sweeps/<name>`) holds the same words, one per line, plus optional
SWEEP_MODE=, SWEEP_TRIALS= and SWEEP_SEED= lines, so a campaign is versioned.
A swept name that is no Kconfig symbol, choice, old name or command-line alias
is refused at once, with the symbol it most likely meant (and the file's line).
MATRIX_SEEDS trains every point once per seed, as it does a matrix's runs
(lib/matrix/grid.py); a sweep over TRAIN_SEED itself is then refused, since
both would set each run's seed. SWEEP_SEED only fixes random mode's draws.
"""

from __future__ import annotations

import itertools
import math
import random
import re
from dataclasses import dataclass, field
from pathlib import Path

from lib.config.kconfig import ConfigError, closest_name, open_tree
from lib.config.overrides import ALIASES
from lib.config.renames import current_name
from lib.paths import SWEEPS

_RANGE = re.compile(r"^(-?[\d.eE+-]+)\.\.(-?[\d.eE+-]+)(:log)?$")
_SETTINGS = ("SWEEP_MODE", "SWEEP_TRIALS", "SWEEP_SEED")


@dataclass(frozen=True)
class Param:
    symbol: str
    values: tuple[str, ...] = ()  # a list of values
    low: float | None = None  # or a range (random mode only)
    high: float | None = None
    log: bool = False

    def draw(self, rng: random.Random) -> str:
        if self.values:
            return rng.choice(self.values)
        assert self.low is not None and self.high is not None
        if self.log:
            x = math.exp(rng.uniform(math.log(self.low), math.log(self.high)))
        else:
            x = rng.uniform(self.low, self.high)
        integer = float(self.low).is_integer() and float(self.high).is_integer() and not self.log
        return str(round(x)) if integer else f"{x:.3g}"


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
            "log": [p.symbol for p in self.params if p.log],
        }


def _param(word: str, mode: str) -> Param:
    symbol, sep, spec = word.partition("=")
    if not sep or not re.fullmatch(r"[A-Z][A-Z0-9_]*", symbol) or not spec:
        raise ConfigError([f"sweep: '{word}' is not SYMBOL=v1,v2,... or SYMBOL=lo..hi[:log]"])
    m = _RANGE.match(spec)
    if not m:
        return Param(symbol, tuple(v for v in spec.split(",") if v))
    if mode != "random":
        raise ConfigError(
            [f"sweep: {word}: a range needs SWEEP_MODE=random (a grid needs listed values)"]
        )
    low, high = float(m.group(1)), float(m.group(2))
    if not low < high or (m.group(3) and low <= 0):
        raise ConfigError(
            [f"sweep: {word}: need lo < hi" + (" and lo > 0 for :log" if m.group(3) else "")]
        )
    return Param(symbol, low=low, high=high, log=bool(m.group(3)))


def _check_names(params: tuple[Param, ...], source: str, lines: dict[str, int]) -> None:
    """Each swept name is one an override takes (lib/config/overrides.py), or a
    problem naming the closest that is: refused before any run is planned."""
    kconf = open_tree()
    known = [*ALIASES, *kconf.named_choices, *(s.name for s in kconf.unique_defined_syms)]
    problems = []
    for p in params:
        name = p.symbol.removeprefix("CONFIG_")
        if name in known or current_name(name) in known:
            continue
        where = f"{source}:{lines[p.symbol]}" if p.symbol in lines else source
        near = closest_name(name, known)
        problems.append(
            f"{where}: {p.symbol} is not a Kconfig symbol or an alias; "
            + (
                f"did you mean {near}?"
                if near
                else "name a symbol as .config does, without CONFIG_ (e.g. LEARNING_RATE)"
            )
        )
    if problems:
        raise ConfigError(problems)


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
    params = tuple(_param(w, mode) for w in spec.split())
    if not params:
        raise ConfigError([f"{source} is empty: give SYMBOL=v1,v2 words"])
    names = [p.symbol for p in params]
    if len(set(names)) != len(names):
        raise ConfigError([f"{source}: a symbol is listed twice ({', '.join(names)})"])
    _check_names(params, source, lines or {})
    return Sweep(params, mode, trials, seed, source)


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
