"""The registry of rules across symbols that Kconfig cannot express, checked
whenever a configuration is loaded or written (lib/config/run_config.check_rules).

A rule is a small function of the RunConfig returning its problems, one
sentence each naming the symbols as CONFIG_NAME=value and a value that
works. Each rule lives in the package that owns its symbols (lib/train/rules.py,
lib/optim/rules.py, ...) and registers itself with `@rule`; every registered
rule runs on every configuration, so all conflicts are reported together.

This layer imports nothing above it, so it cannot import the owners' modules,
and it does not load them by name either: lib/rules.py, at the top of the
layers, imports them and then calls `owners_registered`. Every script hands
down a function that imports it (lib/cli.py, `register_owners_with`), called
on the first check, so a command that reads an already-checked config.py
loads no rule module at all; the tests import it (tests/conftest.py). A
configuration checked without either is refused (`OwnersMissing`) rather
than passed with some rules silently absent. Rule modules stay free of torch and numpy, so
configuration commands stay fast.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from lib.config.run_config import RunConfig

Rule = Callable[["RunConfig"], list[str]]
RULES: list[Rule] = []
# The owners' modules, once lib/rules.py has imported them all (empty before).
OWNERS: list[str] = []
# What imports lib/rules.py when a check first needs it, handed down by the
# entry point (lib/cli.py): most commands read a checked config.py and never do.
_REGISTER: list[Callable[[], None]] = []


class OwnersMissing(RuntimeError):
    """A configuration checked, or a trainer started, before lib/rules.py ran:
    a programming error in an entry point, not a user's."""


def rule(check: Rule) -> Rule:
    """Register `check`: every configuration loaded or written must pass it."""
    if check not in RULES:
        RULES.append(check)
    return check


def owners_registered(modules: list[str]) -> None:
    """Called by lib/rules.py once every owner's module is imported."""
    OWNERS[:] = modules


def register_owners_with(register: Callable[[], None]) -> None:
    """The entry point's way to import lib/rules.py, called on the first check
    (lib/cli.py hands it down: a static import in the top layer, run late)."""
    _REGISTER[:] = [register]


def require_owners(purpose: str) -> None:
    """Stop unless lib/rules.py has run (or the entry point's hook runs it now):
    `purpose` would miss rules or analyses."""
    if not OWNERS and _REGISTER:
        _REGISTER[0]()
    if not OWNERS:
        raise OwnersMissing(
            f"{purpose} before the packages' rules were registered: the entry point must "
            "`import lib.rules` or `import lib.cli` first (every script imports lib/cli.py)"
        )


def broken_rules(run: RunConfig) -> list[str]:
    """Every registered rule's problems with `run`, in registration order."""
    require_owners("a configuration was checked")
    return [problem for check in RULES for problem in check(run)]
