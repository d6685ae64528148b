"""The training schedule's lengths against the run's length (lib/train/Kconfig's
symbols), registered with lib/config/rules.py.

Every length counted in optimizer steps must fit in GPT2_MAX_ITERS and in
each other: an LR warmup that outlasts the run ends it below the peak with
no decay, a WSD decay that overlaps the warmup is silently cut short, and
early stopping whose patience needs more evaluations than the run has never
fires. Each rule names the symbols and a value that works. SPAM's lengths
are lib/optim/rules.py's, the pruning ramp's lib/prune/rules.py's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lib.config.rules import rule
from lib.plural import counted

if TYPE_CHECKING:
    from lib.config.run_config import RunConfig


@rule
def check_lr_warmup(run: RunConfig) -> list[str]:
    """The LR warmup ends by the run's last step. A warmup of the whole run is
    allowed: its last step reaches the peak (an LR range test; knlp's
    debugging defconfigs warm up over all of their 100 steps)."""
    warmup, total = run.GPT2_WARMUP_STEPS, run.GPT2_MAX_ITERS
    if warmup == 0 or warmup <= total:
        return []
    last = total / warmup  # the last step's share of the peak, still warming up
    decay = "" if run.LR_SCHEDULE == "constant" else " and never decay"
    fix = f"WARMUP={total // 10} (a tenth of the run)" if total >= 10 else "WARMUP=0 (no warmup)"
    return [
        f"CONFIG_GPT2_WARMUP_STEPS={warmup} is past CONFIG_GPT2_MAX_ITERS={total}: "
        f"every step would be in the LR warmup (the last at {100 * last:.3g} % of the "
        f"{run.LEARNING_RATE:g} peak){decay} (SCALE_ITERS={total} in place of MAX_ITERS= shortens a run with its warmup); "
        f"use {fix} or MAX_ITERS={max(warmup * 10, warmup + 1)}"
    ]


@rule
def check_wsd_decay(run: RunConfig) -> list[str]:
    """The WSD decay, round(MAX_ITERS x LR_DECAY_FRACTION) steps, fits after the warmup."""
    fraction = run.LR_DECAY_FRACTION  # None unless LR_SCHEDULE_WSD
    warmup, total = run.GPT2_WARMUP_STEPS, run.GPT2_MAX_ITERS
    if fraction is None or fraction == 0 or warmup > total:  # the warmup rule speaks then
        return []
    decay = round(total * fraction)
    room = total - warmup
    if decay == 0:
        return [
            f"CONFIG_LR_DECAY_FRACTION={fraction:g} of CONFIG_GPT2_MAX_ITERS={total} "
            f"rounds to no decay step: the run would never decay; use "
            f'SET="LR_DECAY_FRACTION={_fraction_up(1, total):g}" (one step) or '
            f'SET="LR_DECAY_FRACTION=0" (no decay, said outright)'
        ]
    if decay <= room:
        return []
    return [
        f"CONFIG_GPT2_WARMUP_STEPS={warmup} and the WSD decay of {counted(decay, 'step')} "
        f"(CONFIG_LR_DECAY_FRACTION={fraction:g} of CONFIG_GPT2_MAX_ITERS={total}) "
        f"overlap: the decay would be cut to {counted(room, 'step')}; use "
        f'SET="LR_DECAY_FRACTION={_fraction_down(room, total):g}" or '
        f"WARMUP={total - decay}"
    ]


def _fraction_up(steps: int, total: int) -> float:
    """The smallest 2-decimal fraction f with round(total f) >= steps."""
    f = steps / total
    while round(total * round(f, 2)) < steps:
        f += 0.005
    return round(f, 2)


def _fraction_down(steps: int, total: int) -> float:
    """The largest 2-decimal fraction f with round(total f) <= steps."""
    f = int(steps / total * 100) / 100
    while f > 0 and round(total * f) > steps:
        f = round(f - 0.01, 2)
    return f


@rule
def check_early_stop(run: RunConfig) -> list[str]:
    """Early stopping can fire: the evaluations before the last (an evaluation
    at the last step ends the run anyway) outnumber the patience."""
    patience, every, total = (
        run.TRAIN_EARLY_STOP_PATIENCE,
        run.GPT2_EVAL_INTERVAL,
        run.GPT2_MAX_ITERS,
    )
    if patience is None:  # hidden unless TRAIN_EARLY_STOP
        return []
    before_end = (total - 1) // every
    if before_end > patience:
        return []
    fixes = [f"TRAIN_EARLY_STOP_PATIENCE={before_end - 1}"] if before_end >= 2 else []
    if (total - 1) // (patience + 1) >= 1:
        fixes.append(f"GPT2_EVAL_INTERVAL={(total - 1) // (patience + 1)}")
    fixes.append(f"MAX_ITERS={every * (patience + 1) + 1}")
    return [
        f"CONFIG_TRAIN_EARLY_STOP_PATIENCE={patience} needs {patience + 1} evaluations "
        f"before the last, but CONFIG_GPT2_MAX_ITERS={total} with "
        f"CONFIG_GPT2_EVAL_INTERVAL={every} has {before_end}: early stopping could never "
        f"fire; use {' or '.join(fixes)}"
    ]
