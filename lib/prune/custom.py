"""A researcher's own pruning score, without editing the tree: PRUNING_METHOD=custom
scores weights with the function PRUNING_CUSTOM_SCORE names ("module:function",
importable from the Python path or from the checkout's root, e.g. a file
my_score.py beside the Makefile).

The function is called at every mask update as score(weight, state): the
weight in float32, and the optimizer's state for it, a read-only mapping of
whole tensors ("exp_avg", "exp_avg_sq" under Adam, "momentum_buffer" under
SGD; empty before the first step). It returns a tensor of the weight's shape;
the lowest scores are pruned first, on the schedule, scope and sparsity every
method shares (lib/prune/pruner.py). The pruner keeps nothing for it but the
mask, so `make estimate` prices it as magnitude pruning.

It is checked when the configuration loads (check(): importable, callable with
two arguments), and recorded in metrics.json by name and by the SHA-256 of its
source file (describe()); the run's fingerprint holds the hash too.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from lib import user_code
from lib.plural import with_article
from lib.user_code import UserCodeError

if TYPE_CHECKING:
    from lib.config.symbols import Prune

SCORE = "CONFIG_PRUNING_CUSTOM_SCORE"
EXAMPLE = "my_score:taylor"


def load_score(spec: str) -> Callable[..., Any]:
    """The function "module:function" names; a UserCodeError naming the symbol
    unless it can be called as score(weight, state)."""
    found = user_code.load(spec, SCORE, "function", EXAMPLE)
    if not callable(found) or isinstance(found, type):
        raise UserCodeError(
            f'{SCORE}="{spec}" is {with_article(type(found).__name__)}, not a function'
        )
    try:
        inspect.signature(found).bind(None, None)
    except TypeError:
        raise UserCodeError(
            f'{SCORE}="{spec}": it must take two arguments, score(weight, state), and '
            f"takes {inspect.signature(found)}"
        ) from None
    except ValueError:  # a builtin without a signature: the call itself will tell
        pass
    return found


def check(s: Prune) -> list[str]:
    """The configuration's problems with its score function, naming the symbol."""
    spec = s.PRUNING_CUSTOM_SCORE
    if not spec.strip():
        return [
            f'{SCORE} is empty: name your score function as "module:function", e.g. '
            f'"{EXAMPLE}" (`make menuconfig`, Pruning menu)'
        ]
    try:
        load_score(spec)
    except UserCodeError as err:
        return [str(err)]
    return []


def describe(s: Prune) -> dict[str, Any]:
    """What metrics.json records of it: the function, its source file and that
    file's SHA-256 (a changed file is a different pruning method)."""
    recorded = user_code.describe(s.PRUNING_CUSTOM_SCORE, load_score(s.PRUNING_CUSTOM_SCORE))
    return {"function": recorded["name"], "file": recorded["file"], "sha256": recorded["sha256"]}
