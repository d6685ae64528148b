"""The one grammar of a searched range, `lo..hi` (uniform) or `lo..hi:log`
(log-uniform), read by both searches over a symbol's values: a sweep's random
mode (SWEEP="LR=1e-4..1e-2:log", lib/matrix/sweep.py) and a tuning study
(TUNE="LR=1e-4..1e-2:log", lib/tune/space.py). Both accept the same strings
and refuse the others with the same messages.

It lives in lib/tune rather than lib/config: a range is what a search draws
from, and no configuration code reads one (a .config holds one value per
symbol); lib.tune is the lowest layer that searches, and lib.matrix, above it,
may import it (pyproject.toml's [tool.importlinter] layers).

Accepted: two numbers joined by `..`, then optionally `:log`. A number has an
optional sign, digits with an optional fraction, and an optional exponent:
`0`, `-2`, `0.5`, `.5`, `1e-4`, `3E+2`. Refused, each with its own message:
no `..`; three dots (`1...5`: 1 to .5, or a slip for 1..5?); an end that is
no number (`1.`, `inf`, `0x10`, `1_000`); an option other than `:log`; a low
end not below the high end; a log range whose low end is not above 0; for an
integer symbol, ends that are not integers; ends outside the symbol's allowed
range. Both ends are then checked once, up front, not run by run.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from lib.config.kconfig import clipped

_NUMBER = re.compile(r"[-+]?(?:\d+(?:\.\d+)?|\.\d+)(?:[eE][-+]?\d+)?")
EXAMPLES = "e.g. 1e-4..1e-2:log or 0..100"


class RangeError(ValueError):
    """A range the grammar refuses; the message says why and what to write
    (callers put where it was written in front)."""


@dataclass(frozen=True)
class Range:
    low: float
    high: float
    log: bool = False
    integer: bool = False

    def at(self, u: float) -> float | int:
        """The value a fraction u (0 to 1) of the way from low to high: in log
        space for a log range, rounded for an integer one."""
        if self.log:
            a, b = math.log(self.low), math.log(self.high)
            x = math.exp(a + (b - a) * u)
        else:
            x = self.low + (self.high - self.low) * u
        return round(x) if self.integer else x


def is_range(spec: str) -> bool:
    """Whether spec is written as a range (the grammar may still refuse it):
    numbers never contain `..`."""
    return ".." in spec


def parse_range(
    spec: str,
    symbol: str = "",
    integer: bool = False,
    allowed: tuple[float, float] | None = None,
) -> Range:
    """`lo..hi[:log]` -> a Range, or RangeError. symbol names the symbol in
    messages about its type and allowed (low, high) range."""
    body, colon, option = spec.partition(":")
    if colon and option != "log":
        raise RangeError(
            f'":{clipped(option)}" is no range option; the one option is :log '
            f"(log-uniform), {EXAMPLES}"
        )
    if "..." in body:  # 1...5: 1 to .5, or a slip for 1..5? Neither is guessed
        raise RangeError(
            '"..." is ambiguous; join the ends with two dots and write a fraction with '
            "its leading 0 (0..0.5, not 0...5)"
        )
    low_text, dots, high_text = body.partition("..")
    if not dots:
        raise RangeError(
            f'"{clipped(spec)}" is not a range; write lo..hi (uniform) or lo..hi:log '
            f"(log-uniform), {EXAMPLES}"
        )
    low, high = _number(low_text, "low"), _number(high_text, "high")
    if not low < high:
        raise RangeError(
            "the low end must be below the high end; "
            + (
                f"swap them: {high_text}..{low_text}{colon}{option}"
                if low > high
                else "to fix one value, set it instead of searching it"
            )
        )
    if option == "log" and low <= 0:
        raise RangeError(
            "a log range needs a low end above 0 (log-uniform draws never reach 0); "
            "start it at a small positive value such as 1e-6, or drop :log"
        )
    name = f"CONFIG_{symbol}" if symbol else "the symbol"
    if integer and not (low.is_integer() and high.is_integer()):
        raise RangeError(f"{name} is an integer; give integer ends")
    if allowed is not None and (low < allowed[0] or high > allowed[1]):
        raise RangeError(
            f"{name} allows {allowed[0]:g} to {allowed[1]:g}; keep the range within it"
        )
    return Range(low, high, option == "log", integer)


def _number(text: str, end: str) -> float:
    if not text:
        raise RangeError(f"the range has no {end} end; write lo..hi, {EXAMPLES}")
    if not _NUMBER.fullmatch(text):
        raise RangeError(
            f'the {end} end "{clipped(text)}" is not a number; write one as 100, -2, 0.5 or 1e-4'
        )
    value = float(text)
    if not math.isfinite(value):
        raise RangeError(f"the {end} end {clipped(text)} is beyond a float's range")
    return value
