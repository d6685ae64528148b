"""A test matrix's per-axis settings: MATRIX_OPTIMIZER_SETTINGS gives an optimizer
its own values in every run it trains, MATRIX_PRUNING_SETTINGS a pruning method
(e.g. "movement:PRUNING_SCHEDULE_LINEAR=y" beside magnitude runs on another
schedule). One parser for both: "key:SYMBOL=value,SYMBOL=value key2:...", each
key an enabled one, named once; the values are checked with each run like any
override (lib/matrix/grid.py)."""

from __future__ import annotations

import re

from lib.config.kconfig import ConfigError
from lib.config.overrides import ALIASES
from lib.config.renames import current_name

Overrides = list[tuple[str, str]]


def parse_settings(
    symbol: str, text: str, enabled: list[str], kind: str, grid_symbols: tuple[str, ...]
) -> dict[str, Overrides]:
    """CONFIG_<symbol>'s text -> key -> the overrides its runs add. `kind` names a key
    in messages ("optimizer", "pruning method"); grid_symbols (and MATRIX_*) choose
    which runs the matrix makes, so no setting may change them."""
    out: dict[str, Overrides] = {}
    problems = []
    for word in text.split():
        key, _, settings = word.partition(":")
        pairs = [item.partition("=") for item in settings.split(",") if item]
        names = [ALIASES.get(n, current_name(n.removeprefix("CONFIG_"))) for n, _, _ in pairs]
        if not pairs or any(
            not sep or not re.fullmatch(r"[A-Z][A-Z0-9_]*", name) or not value
            for name, sep, value in pairs
        ):
            problems.append(
                f"CONFIG_{symbol}: '{word}' is not "
                f"{kind.replace(' ', '-')}:SYMBOL=value,SYMBOL=value"
            )
        elif key not in enabled:
            problems.append(
                f"CONFIG_{symbol}: '{key}' is not an enabled {kind} "
                f"(enabled: {', '.join(enabled) or 'none'}); its settings would apply to no run"
            )
        elif key in out:
            problems.append(
                f"CONFIG_{symbol}: '{key}' is named twice: join its settings with commas "
                f"in one word"
            )
        elif any(n in grid_symbols or n.startswith("MATRIX_") for n in names):
            problems.append(
                f"CONFIG_{symbol}: '{word}' sets which runs the matrix makes "
                f"({', '.join(grid_symbols)}, MATRIX_*): set those in their menus"
            )
        else:
            out[key] = [(name, value) for name, _, value in pairs]
    if problems:
        raise ConfigError(problems, "test matrix")
    return out
