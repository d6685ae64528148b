"""The KV circuit analysis's settings (MECHINT_KV_*, lib/eval/Kconfig), parsed
and checked without torch, so the load-time rule (lib/eval/rules.py) is cheap;
and the two schedules every step follows: the fraction of channels off and
the relaxation's temperature."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from lib.config.symbols import Eval

SCHEDULES = ("linear", "exp", "constant")


@dataclass(frozen=True)
class Temperature:
    kind: str
    start: float
    end: float

    def at(self, progress: float) -> float:
        """T at progress 0 (first step) .. 1 (last)."""
        if self.kind == "linear":
            return self.start + progress * (self.end - self.start)
        if self.kind == "exp":
            return math.exp(
                math.log(self.start) + progress * (math.log(self.end) - math.log(self.start))
            )
        return self.start


def parse_temperature(text: str) -> Temperature:
    """ "linear:1.0:0.1", "exp:1.0:0.01", "constant:0.5" -> Temperature; a
    ValueError naming the symbol otherwise."""
    where = f'CONFIG_MECHINT_KV_TEMP_SCHEDULE="{text}"'
    parts = text.strip().split(":")
    want = 2 if parts[0] == "constant" else 3
    if parts[0] not in SCHEDULES or len(parts) != want:
        raise ValueError(
            f'{where}: write "linear:START:END", "exp:START:END" or "constant:T" '
            f'(positive temperatures), e.g. "linear:1.0:0.1"'
        )
    try:
        values = [float(p) for p in parts[1:]]
    except ValueError:
        raise ValueError(f"{where}: the temperatures must be numbers") from None
    if not all(v > 0 and math.isfinite(v) for v in values):
        raise ValueError(f"{where}: temperatures must be positive")
    return Temperature(parts[0], values[0], values[-1])


@dataclass(frozen=True)
class Settings:
    sparsity: float
    steps: int
    lr: float
    temperature: Temperature
    eval_iters: int
    save_masks: bool

    @classmethod
    def from_run(cls, e: Eval) -> Settings:
        """The run's MECHINT_KV_* values, checked; ValueError names every bad one."""
        problems = settings_problems(e)
        if problems:
            raise ValueError("; ".join(problems))
        return cls(
            float(e.MECHINT_KV_SPARSITY),
            e.MECHINT_KV_STEPS,
            float(e.MECHINT_KV_LR),
            parse_temperature(e.MECHINT_KV_TEMP_SCHEDULE),
            e.MECHINT_KV_EVAL_ITERS,
            e.MECHINT_KV_SAVE_MASKS,
        )


def _number(text: str) -> float:
    try:
        return float(text or "nan")
    except ValueError:
        return math.nan


def settings_problems(e: Eval) -> list[str]:
    """What is wrong with the MECHINT_KV_* values (Kconfig checks the ints' ranges)."""
    problems = []
    if not 0 <= _number(e.MECHINT_KV_SPARSITY) < 1:
        problems.append(
            f'CONFIG_MECHINT_KV_SPARSITY="{e.MECHINT_KV_SPARSITY}" must be a number '
            f'from 0 up to (not including) 1, e.g. "0.95"'
        )
    lr = _number(e.MECHINT_KV_LR)
    if not (lr > 0 and math.isfinite(lr)):
        problems.append(
            f'CONFIG_MECHINT_KV_LR="{e.MECHINT_KV_LR}" must be a positive number, e.g. "0.01"'
        )
    try:
        parse_temperature(e.MECHINT_KV_TEMP_SCHEDULE)
    except ValueError as err:
        problems.append(str(err))
    return problems


def check_settings(e: Eval) -> list[str]:
    """The problems with the MECHINT_KV_* values (lib/eval/rules.py checks them on load)."""
    return settings_problems(e) if e.MECHINT_KV else []


def progress(step: int, steps: int) -> float:
    """0 at the first step, 1 at the last."""
    return 1.0 if steps == 1 else step / (steps - 1)


def kept_count(channels: int, sparsity: float) -> int:
    """Channels a layer of `channels` keeps at this sparsity (at least one)."""
    return max(1, round((1.0 - sparsity) * channels))
