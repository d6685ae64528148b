"""Schedule lengths against the run's length, all in one place.

Every length counted in optimizer steps must fit in GPT2_MAX_ITERS and in
each other: an LR warmup that outlasts the run ends it below the peak with
no decay, a WSD decay that overlaps the warmup is silently cut short, SPAM
clipping that waits past the next reset never clips, a pruning ramp
past the end misses its target sparsity, and early stopping whose patience
needs more evaluations than the run has never fires (what SPAM's lengths do
in a short run is not refused: see check_spam_schedule). Each rule names
the symbols and a value that works; all are registered with
lib/config/rules.py, so one load reports every conflict of a configuration.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from lib.config.rules import rule
from lib.plural import counted

if TYPE_CHECKING:
    from lib.config.run_config import RunConfig


@rule
def check_lr_warmup(run: RunConfig) -> list[str]:
    """The LR warmup ends before the run does, leaving at least one step after it."""
    warmup, total = run.GPT2_WARMUP_STEPS, run.GPT2_MAX_ITERS
    if warmup == 0 or warmup < total:
        return []
    last = run.LEARNING_RATE * total / warmup  # the LR of the last step, still warming up
    decay = "" if run.LR_SCHEDULE == "constant" else " and never decay"
    fix = (f"GPT2_WARMUP_STEPS={total // 10} (a tenth of the run)" if total >= 10
           else "GPT2_WARMUP_STEPS=0 (no warmup)")
    return [f"CONFIG_GPT2_WARMUP_STEPS={warmup} is not below CONFIG_GPT2_MAX_ITERS={total}: "
            f"every step would be in the LR warmup (the last at {last:.2g} of the "
            f"{run.LEARNING_RATE:g} peak){decay}; use {fix} or MAX_ITERS={max(warmup * 10, warmup + 1)}"]


@rule
def check_wsd_decay(run: RunConfig) -> list[str]:
    """The WSD decay, round(MAX_ITERS x LR_DECAY_FRACTION) steps, fits after the warmup."""
    fraction = run.LR_DECAY_FRACTION  # None unless LR_SCHEDULE_WSD
    warmup, total = run.GPT2_WARMUP_STEPS, run.GPT2_MAX_ITERS
    if fraction is None or fraction == 0 or warmup >= total:  # the warmup rule speaks then
        return []
    decay = round(total * fraction)
    room = total - warmup
    if decay == 0:
        return [f"CONFIG_LR_DECAY_FRACTION={fraction:g} of CONFIG_GPT2_MAX_ITERS={total} "
                f"rounds to no decay step: the run would never decay; use "
                f"LR_DECAY_FRACTION={_fraction_up(1, total):g} (one step) or "
                f"LR_DECAY_FRACTION=0 (no decay, said outright)"]
    if decay <= room:
        return []
    return [f"CONFIG_GPT2_WARMUP_STEPS={warmup} and the WSD decay of {counted(decay, 'step')} "
            f"(CONFIG_LR_DECAY_FRACTION={fraction:g} of CONFIG_GPT2_MAX_ITERS={total}) "
            f"overlap: the decay would be cut to {counted(room, 'step')}; use "
            f"LR_DECAY_FRACTION={_fraction_down(room, total):g} or "
            f"GPT2_WARMUP_STEPS={total - decay}"]


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
def check_spam_schedule(run: RunConfig) -> list[str]:
    """SPAM's no-clipping window fits between two resets.

    Not refused, though each makes SPAM act less than its name says: a run
    shorter than SPAM_INTERVAL (no reset, as in every tiny run at the paper's
    500) or than SPAM_CLIP_SKIP_STEPS (no clipping), a run ending inside the
    warmup after a reset (the field's reference, 10000 steps with resets
    every 500, resets on its last call) and a warmup longer than the interval
    (the authors' launcher). The SPAM symbols' help says so."""
    skip = run.SPAM_CLIP_SKIP_STEPS  # None unless SPAM's clipping is on
    interval = run.SPAM_INTERVAL  # None unless SPAM's resets are on
    if skip is not None and interval is not None and skip >= interval:
        return [f"CONFIG_SPAM_CLIP_SKIP_STEPS={skip} must be below CONFIG_SPAM_INTERVAL="
                f"{interval}: no call would ever be clipped; use SPAM_CLIP_SKIP_STEPS="
                f"{min(20, interval - 1)}"]
    return []


@rule
def check_pruning_ramp(run: RunConfig) -> list[str]:
    """The sparsity ramp starts after its warmup and ends within the run."""
    warmup, ramp_end = run.PRUNING_WARMUP, run.PRUNING_RAMP_END
    if warmup is None or ramp_end is None:  # hidden exactly when PRUNING_MODE_NONE
        return []
    total = run.GPT2_MAX_ITERS
    problems = []
    if warmup >= ramp_end:
        problems.append(f"CONFIG_PRUNING_WARMUP={warmup} must be below "
                        f"CONFIG_PRUNING_RAMP_END={ramp_end}: the ramp would have no steps; "
                        f"use PRUNING_WARMUP={ramp_end // 5}")
    if ramp_end > total:
        fits = max(1, total * 4 // 5)
        problems.append(f"CONFIG_PRUNING_RAMP_END={ramp_end} is past CONFIG_GPT2_MAX_ITERS="
                        f"{total}: the run would end below the target sparsity; use "
                        f"PRUNING_RAMP_END={fits}{f' and PRUNING_WARMUP={fits // 5}' if warmup >= fits else ''} "
                        f"or MAX_ITERS={ramp_end}")
    return problems


@rule
def check_early_stop(run: RunConfig) -> list[str]:
    """Early stopping can fire: the evaluations before the last (an evaluation
    at the last step ends the run anyway) outnumber the patience."""
    patience, every, total = run.TRAIN_EARLY_STOP_PATIENCE, run.GPT2_EVAL_INTERVAL, run.GPT2_MAX_ITERS
    if patience is None:  # hidden unless TRAIN_EARLY_STOP
        return []
    before_end = (total - 1) // every
    if before_end > patience:
        return []
    fixes = [f"TRAIN_EARLY_STOP_PATIENCE={before_end - 1}"] if before_end >= 2 else []
    if (total - 1) // (patience + 1) >= 1:
        fixes.append(f"GPT2_EVAL_INTERVAL={(total - 1) // (patience + 1)}")
    fixes.append(f"MAX_ITERS={every * (patience + 1) + 1}")
    return [f"CONFIG_TRAIN_EARLY_STOP_PATIENCE={patience} needs {patience + 1} evaluations "
            f"before the last, but CONFIG_GPT2_MAX_ITERS={total} with "
            f"CONFIG_GPT2_EVAL_INTERVAL={every} has {before_end}: early stopping could never "
            f"fire; use {' or '.join(fixes)}"]
