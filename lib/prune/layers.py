"""Per-layer pruning budgets, used by the state variant bitter4.

bitter4 prunes layers unevenly. Its factor for a layer comes from the rank
of the layer's mean score (over the entries not yet pruned): the layer with
the lowest mean gets 1.3, the highest 0.7, the others linearly in rank
between (ties keep parameter order; a single layer gets 1.0). Layer i's
sparsity is then clip(c * factor_i * target, already_pruned_i, cap) with
cap = max(0.95, target), and the one scale c is chosen (by bisection) so the
layers together prune round(target * total) entries: the global count
matches the global target, while the ratio between layers follows the
factors wherever neither bound binds. (AdamWPrune itself spreads 0.7x..1.3x
by depth; ranking by score uses what the network learned instead.)
"""
from __future__ import annotations

import math

FACTOR_HIGH = 1.3  # factor of the layer with the lowest mean score
FACTOR_LOW = 0.7  # factor of the layer with the highest mean score
CAP = 0.95  # no layer is pruned beyond this (unless the target itself is higher)


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
        return [min(max(c * f * target * n, lo), hi)
                for n, f, lo, hi in zip(sizes, factors, floors, highs)]

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
