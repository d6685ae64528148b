"""The registry of rules across symbols that Kconfig cannot express, checked
whenever a configuration is loaded or written (lib/config/run_config.check_rules).

A rule is a small function of the RunConfig returning its problems, one
sentence each naming the symbols as CONFIG_NAME=value and a value that
works. Each rule lives in the package that owns its symbols (lib/train/rules.py,
lib/optim/rules.py, ...) and registers itself with `@rule`; every registered
rule runs on every configuration, so all conflicts are reported together.

This layer imports nothing above it, so it cannot import the owners' modules.
They are listed, above it, in lib/rules.py, which `load_owners` imports by
name (OWNERS) on the first check: whatever loads a configuration gets every
rule, and no entry point has to remember to import them. The import by name
climbs the layers, so pyproject.toml lists it beside the layer contract
([tool.kconfig-llm.dynamic-imports]). Rule modules stay free of torch, so
configuration commands stay fast.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from lib.config.run_config import RunConfig

Rule = Callable[["RunConfig"], list[str]]
RULES: list[Rule] = []
# The module that imports every package's rules (it lives above this layer).
OWNERS = "lib.rules"


def rule(check: Rule) -> Rule:
    """Register `check`: every configuration loaded or written must pass it."""
    if check not in RULES:
        RULES.append(check)
    return check


def load_owners() -> None:
    """Import lib/rules.py: every package registers its rules (and the trainer's
    analyses, lib/train/hooks.py) with the layers below it. Idempotent."""
    importlib.import_module(OWNERS)


def broken_rules(run: RunConfig) -> list[str]:
    """Every registered rule's problems with `run`, in registration order."""
    load_owners()  # registers the owners' rules on first use
    return [problem for check in RULES for problem in check(run)]
