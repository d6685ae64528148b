"""MATRIX_SEEDS: the seeds every configuration of a matrix trains with, and
what each seed adds to a run (its TRAIN_SEED override and its id's suffix)."""

from __future__ import annotations

import re

from lib.config.kconfig import ConfigError
from lib.config.overrides import ALIASES
from lib.config.renames import current_name

Overrides = list[tuple[str, str]]

MAX_SEEDS = 100  # per configuration: a slip such as "1000" must not queue a thousand runs


def parse_seeds(text: str) -> list[int]:
    """MATRIX_SEEDS -> the seeds every configuration trains with: [] when empty
    (one run with TRAIN_SEED as configured), "3" -> [1, 2, 3] (a count),
    "1 7 42" or "1,7,42" -> those seeds in that order. TRAIN_SEED's own range
    is checked later, like any override, when each run is loaded."""
    words = text.replace(",", " ").split()
    where = f'CONFIG_MATRIX_SEEDS="{text}"'
    if not words:
        return []
    if not all(re.fullmatch(r"[0-9]+", w) for w in words):
        raise ConfigError(
            [
                f"{where}: give a count of seeds (e.g. 3 for seeds 1, 2, 3) or a "
                f"list of seeds, non-negative integers (e.g. 1 7 42)"
            ]
        )
    numbers = [int(w) for w in words]
    if len(numbers) == 1:
        if not 1 <= numbers[0] <= MAX_SEEDS:
            raise ConfigError(
                [
                    f"{where}: a count of seeds is 1 to {MAX_SEEDS}; for several "
                    f"chosen seeds list them (e.g. 1 7 42)"
                ]
            )
        return list(range(1, numbers[0] + 1))
    twice = sorted({n for n in numbers if numbers.count(n) > 1})
    if twice:
        raise ConfigError(
            [f"{where}: listed twice: {', '.join(map(str, twice))}; each seed trains once"]
        )
    if len(numbers) > MAX_SEEDS:
        raise ConfigError([f"{where}: {len(numbers)} seeds; at most {MAX_SEEDS} per configuration"])
    return numbers


def sets_seed(name: str) -> bool:
    """Whether an override of name sets TRAIN_SEED (directly, by alias or old name)."""
    return ALIASES.get(name, current_name(name.removeprefix("CONFIG_"))) == "TRAIN_SEED"


def seeded(seeds: list[int]) -> list[tuple[Overrides, str]]:
    """(TRAIN_SEED override, id suffix) per seed; one plain run without seeds."""
    if not seeds:
        return [([], "")]
    return [([("TRAIN_SEED", str(s))], f"_s{s}") for s in seeds]
