"""Rules across symbols that Kconfig cannot express, checked whenever a
configuration is loaded or written (lib/config/run_config.check_rules).

A rule is a small function of the RunConfig returning its problems, one
sentence each naming the symbols as CONFIG_NAME=value and a value that
works; `@rule` registers it in RULES, and every registered rule runs on
every configuration, so all conflicts are reported together. The schedule
lengths' rules are in lib/config/schedule_rules.py. Kept free of torch so
configuration commands stay fast: a family's config class is plain Python
(gpt2/config.py, hamt/config.py).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from lib.bench.inference import check_lengths
from lib.model import registry

if TYPE_CHECKING:
    from lib.config.run_config import RunConfig

Rule = Callable[["RunConfig"], list[str]]
RULES: list[Rule] = []


def rule(check: Rule) -> Rule:
    """Register `check`: every configuration loaded or written must pass it."""
    RULES.append(check)
    return check


def broken_rules(run: RunConfig) -> list[str]:
    """Every registered rule's problems with `run`, in registration order."""
    return [problem for check in RULES for problem in check(run)]


@rule
def check_spam_start(run: RunConfig) -> list[str]:
    """Clipping must not start while the second moment is still zero."""
    skip = run.SPAM_CLIP_SKIP_STEPS  # None unless SPAM's clipping is on
    if skip is not None and skip < 2 and not run.SPAM_CLIP_SPARE_UNSEEN:
        return [f"CONFIG_SPAM_CLIP_SKIP_STEPS={skip} clips call 1 against a zero second "
                f"moment, which sets every gradient entry to 0; use 2 or more, or set "
                f"CONFIG_SPAM_CLIP_SPARE_UNSEEN=y"]
    return []


@rule
def check_family(run: RunConfig) -> list[str]:
    """The family's own config class checks its fields (n_embd % n_head, ...)."""
    try:
        registry.family(run.MODEL).from_run_config(run, 50257)
    except ValueError as err:
        return [str(err)]
    return []


rule(check_lengths)  # INFERENCE_BENCH_LENGTHS (lib/bench/inference.py)
