"""The pruning methods, AdamWPrune's score variants and the matrix's sparsities are
one registry (lib/prune/registry.py): the Kconfig symbols, the matrix's axes, the
pruner's accepted methods and the estimate's prices come from it."""

from __future__ import annotations

import kconfiglib
import pytest

from lib.config.kconfig import open_tree
from lib.matrix import grid
from lib.prune import pruner, registry, scores
from lib.prune.registry import METHODS, SCORE_VARIANTS


def _members(kconf, choice: str) -> list[str]:
    return [s.name for s in kconf.named_choices[choice].syms]


def test_records_and_kconfig_name_the_same_methods_variants_and_sparsities():
    kconf = open_tree()
    assert _members(kconf, "PRUNING_METHOD") == [m.choice_symbol for m in METHODS]
    enable = sorted(
        n
        for n in kconf.syms
        if n.startswith("PRUNING_ENABLE_") and n != "PRUNING_ENABLE_NONE_ADAMWPRUNE"
    )
    assert enable == sorted(registry.matrix_methods())
    assert _members(kconf, "ADAMWPRUNE_VARIANT") == [
        f"ADAMWPRUNE_VARIANT_{v.upper()}" for v in SCORE_VARIANTS
    ]
    assert sorted(n for n in kconf.syms if n.startswith("ADAMWPRUNE_ENABLE_")) == sorted(
        registry.matrix_score_variants()
    )
    sparsities = sorted(n for n in kconf.syms if n.startswith("PRUNING_SPARSITY_"))
    assert sparsities == sorted(registry.matrix_sparsities())
    switches = [
        *registry.matrix_methods(),
        *registry.matrix_score_variants(),
        *registry.matrix_sparsities(),
    ]
    assert all(kconf.syms[s].orig_type == kconfiglib.BOOL for s in switches)
    owned = {s for m in METHODS for s in m.symbols}
    assert owned <= set(kconf.syms) | set(kconf.named_choices), owned
    # the formulas and the pruner's accepted methods are the records' names
    assert SCORE_VARIANTS == tuple(scores.VARIANTS)
    assert list(pruner.METHODS) == [m.name for m in METHODS]
    assert (grid.METHODS, grid.SPARSITIES, grid.SCORE_VARIANTS) == (
        registry.matrix_methods(),
        registry.matrix_sparsities(),
        registry.matrix_score_variants(),
    )
    assert registry.matrix_sparsities()["PRUNING_SPARSITY_95"] == "0.95"
    with pytest.raises(ValueError, match="no record in lib/prune/registry.py"):
        registry.method("wanda")


def test_only_the_state_method_pairs_with_an_optimizer_that_prunes_by_state():
    state = [("PRUNING_MODE", "single"), ("PRUNING_METHOD", "state")]
    magnitude = [("PRUNING_MODE", "single"), ("PRUNING_METHOD", "magnitude")]
    assert grid.compatible("adamwprune", state) and not grid.compatible("adamw", state)
    assert grid.compatible("adamw", magnitude) and not grid.compatible("adamwprune", magnitude)
    assert grid.compatible("adamw", []) and not grid.compatible("adamwprune", [])
    assert grid.compatible("adamwprune", [], adamwprune_dense=True)
