"""The pruning methods, AdamWPrune's score variants and the test matrix's sparsities:
one record or name each, everything else derived.

A method's record gives its name (the value of the Kconfig choice PRUNING_METHOD,
written as the member PRUNING_METHOD_<NAME> and the test-matrix switch
PRUNING_ENABLE_<NAME> in lib/prune/Kconfig), what it scores, its score
function, what it costs per pruned weight (read by `make estimate`), and whether
it scores from the optimizer's state (then it runs with an optimizer whose
record says state_pruning, AdamWPrune, and no other).

A score function takes a weight (float32, whole) and the optimizer's state for
it (a read-only mapping: "exp_avg", "momentum_buffer", ... whole tensors, empty
before the first step) and returns a tensor of the weight's shape; the lowest
scores are pruned first. Movement and state pruning score with buffers and
variants the pruner keeps itself (score ""); "custom" is the researcher's own
function, named by PRUNING_CUSTOM_SCORE (lib/prune/custom.py).

AdamWPrune's score variant's name is the value of ADAMWPRUNE_VARIANT (member ADAMWPRUNE_VARIANT_<NAME>, switch
ADAMWPRUNE_ENABLE_<NAME>); its formula is lib/prune/scores.py's VARIANTS entry.

The matrix (lib/matrix/grid.py), the estimate (lib/estimate/memory.py) and the
pruner (lib/prune/pruner.py) read these; tests/lib/prune/test_prune_registry.py
checks them against the Kconfig symbols. This file imports no torch:
configuration checks read it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lib.config.symbols import Prune


@dataclass(frozen=True)
class PruningMethod:
    name: str
    description: str  # what it scores and keeps, as the pruner's errors list it
    # Bytes the pruner keeps per pruned weight (Pruner.state_bytes): the bool mask,
    # plus what the method's score needs
    bytes_per_weight: Callable[[Prune], int]
    # "module:function" in lib/prune: function(weight, state) -> scores (see above);
    # "" where the pruner scores it itself or the user names the function
    score: str = ""
    by_optimizer_state: bool = False  # scores from the optimizer's moments (AdamWPrune)
    symbols: tuple[str, ...] = ()  # the settings it owns (beyond its two symbols)

    @property
    def choice_symbol(self) -> str:
        """The PRUNING_METHOD member selecting it (its value is the name)."""
        return "PRUNING_METHOD_" + self.name.upper()

    @property
    def matrix_symbol(self) -> str:
        """The bool that enables it in a test matrix (PRUNING_MODE_MULTIPLE)."""
        return "PRUNING_ENABLE_" + self.name.upper()


def _mask_only(s: Prune) -> int:
    return 1


def _mask_and_fp32(s: Prune) -> int:
    """The mask and one fp32 buffer: the accumulated score, or knlp's w0."""
    return 1 + 4


CUSTOM = "custom"  # the user's score function, PRUNING_CUSTOM_SCORE

# In the order menus, matrices and error messages list them.
METHODS: tuple[PruningMethod, ...] = (
    PruningMethod(
        "magnitude",
        "|w|; the only per-weight buffer is the bool mask",
        _mask_only,
        score="scores:weight_magnitude",
    ),
    PruningMethod(
        "movement",
        "Sanh et al. 2020, S = sum_t -(w * grad); one float32 score buffer per weight",
        _mask_and_fp32,
        symbols=("PRUNING_MOVEMENT_KNLP",),
    ),
    PruningMethod(
        "state",
        "AdamWPrune: a score variant from the optimizer's exp_avg/exp_avg_sq; mask only",
        _mask_only,
        by_optimizer_state=True,
        symbols=("ADAMWPRUNE_VARIANT", "ADAMWPRUNE_BITTER4_RANK_BUDGET"),
    ),
    # A score function of the user's, named by PRUNING_CUSTOM_SCORE (lib/prune/custom.py)
    PruningMethod(
        CUSTOM,
        "your own score function (PRUNING_CUSTOM_SCORE); mask only",
        _mask_only,
        symbols=("PRUNING_CUSTOM_SCORE",),
    ),
)
BY_NAME = {m.name: m for m in METHODS}
DENSE = "none"  # the matrix's dense entry (PRUNING_ENABLE_NONE): no method at all

# AdamWPrune's score variants (formulas: lib/prune/scores.py VARIANTS), menu order.
SCORE_VARIANTS: tuple[str, ...] = (
    "bitter0",
    "bitter1",
    "bitter2",
    "bitter3",
    "bitter4",
    "bitter5",
    "bitter6",
    "bitter7",
    "bitter8",
    "bitter9",
    "obd",
    "toward_zero",
)

# The target sparsities a test matrix offers (PRUNING_SPARSITY_<percent>).
SPARSITIES: tuple[str, ...] = ("0.5", "0.7", "0.9", "0.95", "0.99")


def method(name: str) -> PruningMethod:
    """The record of PRUNING_METHOD value `name`; a ValueError naming the known ones."""
    try:
        return BY_NAME[name]
    except KeyError:
        known = ", ".join(BY_NAME)
        raise ValueError(
            f"pruning method '{name}' has no record in lib/prune/registry.py ({known})"
        ) from None


def score_function(record: PruningMethod) -> Any:
    """The record's score function, its module imported on first use; None where
    the record names none (movement, state, custom)."""
    if not record.score:
        return None
    module, _, attribute = record.score.partition(":")
    return getattr(import_module(f".{module}", __package__), attribute)


def matrix_methods() -> dict[str, str]:
    """PRUNING_ENABLE_<NAME> -> method, the dense entry first (the matrix's axis)."""
    return {"PRUNING_ENABLE_NONE": DENSE, **{m.matrix_symbol: m.name for m in METHODS}}


def matrix_sparsities() -> dict[str, str]:
    """PRUNING_SPARSITY_<percent> -> the target sparsity its runs train to."""
    return {f"PRUNING_SPARSITY_{round(float(s) * 100)}": s for s in SPARSITIES}


def matrix_score_variants() -> dict[str, str]:
    """ADAMWPRUNE_ENABLE_<NAME> -> score variant."""
    return {f"ADAMWPRUNE_ENABLE_{v.upper()}": v for v in SCORE_VARIANTS}
