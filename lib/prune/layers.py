"""Per-layer pruning budgets for the state variant bitter4.

Depth ramp (the reference's, and bitter4's default): layer i of L, in the
order model.prunable() lists them (input to output), gets sparsity
min(0.95, s * (0.7 + 0.6 * i / (L - 1))) at scheduled sparsity s, as
AdamWPrune's compute_layer_sparsity does (mcgrof/knlp 041ec5f2). Early
layers keep more weights. The global sparsity then depends on the layer
sizes and the cap: it is near s, not s exactly.

Score rank (ours, ADAMWPRUNE_BITTER4_RANK_BUDGET): the factor comes from
the rank of the layer's mean score (over the entries not yet pruned): the
layer with the lowest mean gets 1.3, the highest 0.7, the others linearly
in rank between (ties keep parameter order; a single layer gets 1.0).
Layer i's sparsity is then clip(c * factor_i * target, already_pruned_i,
cap) with cap = max(0.95, target), and the one scale c is chosen (by
bisection) so the layers together prune round(target * total) entries: the
global count matches the global target, while the ratio between layers
follows the factors wherever neither bound binds.
"""

from __future__ import annotations

import math

FACTOR_HIGH = 1.3  # last layer (depth ramp) / lowest mean score (rank)
FACTOR_LOW = 0.7  # first layer (depth ramp) / highest mean score (rank)
CAP = 0.95  # no layer is pruned beyond this (rank: unless the target itself is higher)


def depth_ramp(n_layers: int, sparsity: float) -> list[float]:
    """The reference's per-layer sparsities: 0.7x for the first layer to 1.3x for the last."""
    if n_layers < 1:
        raise ValueError(f"n_layers={n_layers} is invalid: it must be >= 1")
    span = max(n_layers - 1, 1)
    # 0.6 written out (1.3 - 0.7 is 0.6000000000000001): the same floats as the reference.
    return [min(CAP, sparsity * (FACTOR_LOW + 0.6 * (i / span))) for i in range(n_layers)]


def layer_factors(means: list[float]) -> list[float]:
    """Sparsity factor per layer: 1.3 for the lowest mean score down to 0.7 for the highest."""
    n = len(means)
    if n == 1:
        return [1.0]
    order = sorted(range(n), key=lambda i: means[i])  # stable: ties keep parameter order
    factors = [0.0] * n
    for rank, i in enumerate(order):
        factors[i] = FACTOR_HIGH - (FACTOR_HIGH - FACTOR_LOW) * rank / (n - 1)
    return factors


def allocate(sizes: list[int], floors: list[int], factors: list[float], target: float) -> list[int]:
    """Entries to prune per layer: sum = round(target * sum(sizes)) where the bounds allow.

    floors are the entries each layer has already pruned (pruning is monotone);
    see the module docstring for how the factors shape the split.
    """
    total = sum(sizes)
    goal = round(target * total)
    cap = max(CAP, target)
    highs = [max(math.floor(cap * n), f) for n, f in zip(sizes, floors)]
    if goal <= sum(floors):
        return list(floors)
    if goal >= sum(highs):
        return highs

    def counts(c: float) -> list[float]:
        return [
            min(max(c * f * target * n, lo), hi)
            for n, f, lo, hi in zip(sizes, factors, floors, highs)
        ]

    lo_c, hi_c = 0.0, max(h / (f * target * n) for n, f, h in zip(sizes, factors, highs))
    for _ in range(200):
        mid = 0.5 * (lo_c + hi_c)
        if sum(counts(mid)) < goal:
            lo_c = mid
        else:
            hi_c = mid
    real = counts(hi_c)
    result = [min(max(math.floor(x), lo), hi) for x, lo, hi in zip(real, floors, highs)]
    # Largest remainders first, until the integer counts add up to the goal.
    order = sorted(range(len(sizes)), key=lambda i: result[i] - real[i])
    short = goal - sum(result)
    while short > 0:
        moved = False
        for i in order:
            if short > 0 and result[i] < highs[i]:
                result[i] += 1
                short -= 1
                moved = True
        if not moved:
            break
    return result
