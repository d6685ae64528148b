"""The pruning half of scripts/check_knlp.sh's comparison (lib/knlpcheck/check.py):
the mask updates of one run, as knlp's code makes them and as lib/prune/schedule.py
makes them here. The knlp side is transcribed from knlp's code on its own, apart
from the translation (translate_optim.py), so that a wrong translation shows."""

from __future__ import annotations

from typing import Any

from lib.config.run_config import RunConfig

_RAMP_END = 3000  # gpt2/train.py's --adamwprune-ramp-end-step; MagnitudePruning's ramp_end_step


def _distinct(updates) -> tuple[tuple[int, float], ...]:
    """(step, sparsity) where the sparsity changes, rounded to compare across sides."""
    steps: list[tuple[int, float]] = []
    for step, s in updates:
        if not steps or round(s, 12) != steps[-1][1]:
            steps.append((step, round(s, 12)))
    return tuple(steps)


def knlp_variant_iters(variant: str, iters: int) -> int:
    """gpt2/trainers/vanilla.py lengthens a 10,000-iteration AdamWPrune run for some
    variants (knlp 041ec5f2)."""
    if iters != 10000:
        return iters
    if variant == "bitter2":
        return 12100
    if variant in ("bitter3", "bitter4", "bitter5", "bitter6", "bitter8", "bitter9"):
        return 13000
    return iters


def knlp_state_steps(target: float, warmup: int, iters: int) -> tuple[tuple[int, float], ...]:
    """AdamWPrune's updates (lib/optimizers.py update_adamprune_masks, called after the
    0-based iteration i's optimizer step): when i > warmup and i % 50 == 0, at
    target * min(1, (i - warmup) / (3000 - warmup))^3. Step i + 1 here."""
    return _distinct(
        (i + 1, target * min(1.0, (i - warmup) / (_RAMP_END - warmup)) ** 3)
        for i in range(iters)
        if i > warmup and i % 50 == 0
    )


def knlp_magnitude_steps(target: float, warmup: int, iters: int) -> tuple[tuple[int, float], ...]:
    """Magnitude pruning's updates (lib/magnitude_pruning.py update_masks(i), which
    gpt2/trainers/vanilla.py calls after every 0-based iteration i's optimizer step):
    get_current_sparsity is 0 while i < warmup, the target from i >= 3000, else
    target * ((i - warmup) / (3000 - warmup))^3 (schedule "cubic"); at 0 it returns
    without touching the masks. Step i + 1 here."""

    def current(i: int) -> float:
        if i < warmup:
            return 0.0
        if i >= _RAMP_END:
            return target
        return target * ((i - warmup) / (_RAMP_END - warmup)) ** 3

    return _distinct((i + 1, current(i)) for i in range(iters) if current(i) != 0.0)


def knlp_movement_steps(target: float, warmup: int, iters: int) -> list[tuple[int, float]]:
    """Movement pruning's updates (lib/movement_pruning.py update_masks(i), which
    gpt2/trainers/vanilla.py calls after every 0-based iteration i's optimizer step):
    get_current_sparsity is 0 while i < warmup, the target from i >= 3000, else the
    linear target * (i - warmup) / (3000 - warmup); at 0 it returns, otherwise it
    re-chooses every mask, past the ramp too. Step i + 1 here, every update."""

    def current(i: int) -> float:
        if i < warmup:
            return 0.0
        if i >= _RAMP_END:
            return target
        return target * (i - warmup) / (_RAMP_END - warmup)

    return [(i + 1, current(i)) for i in range(iters) if current(i) != 0.0]


def knlp_movement(target: float, warmup: int, iters: int) -> dict[str, Any]:
    """One run of knlp's movement pruning on GPT-2 (lib/pruning.py create_pruner passes
    the target and --pruning-warmup only): score w (w - w0) over every nn.Linear (the
    tied lm_head's among them), one global threshold, every mask re-chosen at every
    update, so masks can shrink."""
    updates = knlp_movement_steps(target, warmup, iters)
    return {
        "sparsity": target,
        "prune score": "w (w - w0)",
        "pruned weights": "blocks + head",
        "prune threshold": "global",
        "masks only grow": False,
        "prune steps": _distinct(updates),
        "mask updates": len(updates),
    }


def our_pruning(run: RunConfig) -> dict[str, Any]:
    """One run's pruning from this project's schedule (lib/prune/schedule.py)."""
    warmup, ramp_end, every = run.PRUNING_WARMUP, run.PRUNING_RAMP_END, run.PRUNING_FREQUENCY
    target, kind = run.PRUNING_TARGET_SPARSITY, run.PRUNING_SCHEDULE
    assert warmup and ramp_end and every and target is not None and kind  # PRUNING_MODE_SINGLE
    from lib.prune.schedule import mask_update_steps

    updates = mask_update_steps(
        run.GPT2_MAX_ITERS,
        target=target,
        warmup=warmup,
        ramp_end=ramp_end,
        frequency=every,
        kind=kind,
        reselect=bool(run.PRUNING_MOVEMENT_KNLP),
    )
    bitter4 = run.PRUNING_METHOD == "state" and run.ADAMWPRUNE_VARIANT == "bitter4"
    knlp_movement = run.PRUNING_METHOD == "movement" and bool(run.PRUNING_MOVEMENT_KNLP)
    score = {
        "state": run.ADAMWPRUNE_VARIANT,
        "movement": "w (w - w0)" if knlp_movement else "sum -w grad",
    }.get(run.PRUNING_METHOD or "")
    return {
        "sparsity": target,
        "prune score": score,
        "pruned weights": "blocks + head" if run.PRUNING_HEAD else "blocks",
        "prune threshold": (
            ("rank budget" if run.ADAMWPRUNE_BITTER4_RANK_BUDGET else "depth ramp")
            if bitter4
            else run.PRUNING_SCOPE
        ),
        # lib/prune/pruner.py: pruned entries score -inf, but for knlp's movement rule
        "masks only grow": not knlp_movement,
        "prune steps": _distinct(updates),
        "mask updates": len(updates),
    }


def knlp_magnitude(target: float, warmup: int, iters: int) -> dict[str, Any]:
    """One run of knlp's magnitude pruning on GPT-2 (lib/pruning.py create_pruner passes
    the target and --pruning-warmup only): one global threshold over the |w| of every
    nn.Linear, the tied lm_head's among them; the masks zero the weights before each
    update, so a pruned weight (0) stays below every live one: masks only grow."""
    return {
        "sparsity": target,
        "pruned weights": "blocks + head",
        "prune threshold": "global",
        "masks only grow": True,
        "prune steps": knlp_magnitude_steps(target, warmup, iters),
    }


def knlp_adamwprune(v, exp: dict[str, Any]) -> dict[str, Any]:
    """AdamWPrune's pruning as knlp's runner runs it, read from its code at 041ec5f2
    (written here apart from the translation, so that a wrong one shows):
    scripts/run_test_matrix.py passes gpt2/train.py the .config's TARGET_SPARSITY (none:
    "0.9"), PRUNING_WARMUP (none: train.py's 1000) and the variants that are y (none:
    bitter0), one run each; --adamwprune-ramp-end-step keeps its 3000, and nothing sets
    the frequency, so lib/optimizers.py's 50 applies. gpt2/trainers/vanilla.py lengthens
    a 10,000-iteration run for some variants and, after iteration i's optimizer step (i
    from 0), calls update_adamprune_masks(i): when i > warmup and i % 50 == 0 it re-chooses
    the mask of every nn.Linear (the tied lm_head's among them) with one global
    threshold (bitter4: per layer by depth) at target * min(1, (i - warmup) / (3000 -
    warmup))^3. Steps here count optimizer steps from 1: iteration i ends step i + 1."""
    variants = [f"bitter{n}" for n in range(10) if v(f"GPT2_ADAMWPRUNE_VARIANT_BITTER{n}") == "y"]
    variant = variants[0] if len(variants) == 1 else ", ".join(variants) or "bitter0"
    iters = knlp_variant_iters(variant, exp["max iters"])
    target, warmup = float(v("TARGET_SPARSITY") or 0.9), int(v("PRUNING_WARMUP") or 1000)
    # After the ramp it re-chooses at the target: a pruned weight (0) scores 0, below
    # every live score, so nothing changes there; bitter5's scores go negative, so its
    # masks can lose pruned weights ("masks only grow" below).
    steps = knlp_state_steps(target, warmup, iters)
    return {
        "max iters": iters,
        "sparsity": target,
        "prune score": variant,
        "pruned weights": "blocks + head",
        "prune threshold": "depth ramp" if variant == "bitter4" else "global",
        "masks only grow": variant != "bitter5",
        "prune steps": tuple(steps),
    }
