"""SCALE_ITERS=N: a shorter (or longer) run of the same shape.

GPT2_MAX_ITERS becomes N and every length counted in steps that is tied to
the run's length is multiplied by N / GPT2_MAX_ITERS, so a 150-step try of a
2000-step configuration warms up, evaluates, checkpoints and ramps its
pruning over the same fractions of the run, with as many evaluations (points
of the validation curve). The LR decay needs nothing: cosine decays to the
run's end and WSD's LR_DECAY_FRACTION is a fraction of the run. A length also
given on the command line (or by a matrix axis) is kept as given. MAX_ITERS=
sets the iterations alone, as typed. Torch-free, like all of lib/config.
"""

from __future__ import annotations

import re

import kconfiglib

from lib.config.kconfig import clipped

NAME = "SCALE_ITERS"

# Lengths in steps that follow the run's length; 0 (none, or "at each
# evaluation") stays 0. SPAM_INTERVAL is the method's own constant (the
# paper's 500), not a share of the run, so it is not scaled.
TIED = (
    "GPT2_WARMUP_STEPS",
    "GPT2_EVAL_INTERVAL",
    "TRAIN_LOG_INTERVAL",
    "CHECKPOINT_INTERVAL",
    "PRUNING_WARMUP",
    "PRUNING_RAMP_END",
    "PRUNING_FREQUENCY",
)
ALIASED = {"MAX_ITERS": "GPT2_MAX_ITERS", "WARMUP": "GPT2_WARMUP_STEPS"}
# Tied lengths whose order a rule requires (lib/prune/rules.py: the ramp has steps):
# rounding a very short run can make them equal, which the scaling must not cause.
ORDERED = (("PRUNING_WARMUP", "PRUNING_RAMP_END"),)


def _scaled(old: int, steps: int, total: int) -> int:
    return 0 if old == 0 else max(1, round(old * steps / total))


def split(overrides: list[tuple[str, str]]) -> tuple[list[tuple[str, str]], str | None]:
    """(the other overrides, SCALE_ITERS's value or None; the last one given wins)."""
    rest = [(k, v) for k, v in overrides if k != NAME]
    given = [v for k, v in overrides if k == NAME]
    return rest, given[-1] if given else None


def scale(
    kconf: kconfiglib.Kconfig, value: str, given: list[tuple[str, str]]
) -> tuple[list[tuple[str, str]], str, list[str]]:
    """(the overrides SCALE_ITERS=value stands for, the line saying what was
    scaled, problems), from kconf's values after the `given` overrides."""
    named = {ALIASED.get(k, k.removeprefix("CONFIG_")) for k, _ in given}
    where = f"override {NAME}={clipped(value)}"
    if "GPT2_MAX_ITERS" in named:
        return [], "", [f"{where} and MAX_ITERS= both set the run's length: give one"]
    problem = _length_problem(kconf.syms["GPT2_MAX_ITERS"], value)
    if problem:
        return [], "", [f"{where}: {problem} (the run's new length in steps)"]
    steps = int(value)
    total = int(kconf.syms["GPT2_MAX_ITERS"].str_value)
    out = [("GPT2_MAX_ITERS", str(steps))]
    changes, kept = [], []
    for name in TIED:
        sym = kconf.syms.get(name)
        if sym is None or not sym.config_string:
            continue  # hidden here (no pruning, no checkpoints)
        if name in named:
            kept.append(name)
            continue
        old = int(sym.str_value)
        new = _scaled(old, steps, total)
        out.append((name, str(new)))
        if new != old:
            changes.append(f"{name} {old} -> {new}")
    collapsed = [
        _collapsed(kconf, first, second, steps, total, where)
        for first, second in ORDERED
        if not {first, second} & named  # a length given as typed is the user's
    ]
    if any(collapsed):
        return [], "", [p for p in collapsed if p]
    note = (
        f"{NAME}={steps}: GPT2_MAX_ITERS {total} -> {steps} (x{steps / total:.3g}), scaled "
        f"with it: {', '.join(changes) or 'nothing else'}"
        f"{'; kept as given: ' + ', '.join(kept) if kept else ''}; the LR decay follows "
        f"the run's end"
    )
    return out, note, []


def _collapsed(
    kconf: kconfiglib.Kconfig, first: str, second: str, steps: int, total: int, where: str
) -> str | None:
    """Why scaling to `steps` would leave `first` no longer below `second`, with the
    shortest SCALE_ITERS that keeps them apart; None when it does not."""
    syms = [kconf.syms.get(name) for name in (first, second)]
    if any(s is None or not s.config_string for s in syms):
        return None
    low, high = (int(s.str_value) for s in syms if s is not None)
    if low >= high or _scaled(low, steps, total) < _scaled(high, steps, total):
        return None  # already out of order (its rule says so) or kept in order
    shortest = next(
        (
            n
            for n in range(steps + 1, total + 1)
            if _scaled(low, n, total) < _scaled(high, n, total)
        ),
        total,
    )
    return (
        f"{where} is too short for this configuration: {first} {low} -> "
        f"{_scaled(low, steps, total)} and {second} {high} -> {_scaled(high, steps, total)} "
        f"would leave no steps between them; give SCALE_ITERS={shortest} or more, or set "
        f"{first}= and {second}= as well"
    )


def _length_problem(sym: kconfiglib.Symbol, value: str) -> str | None:
    """What is wrong with `value` as GPT2_MAX_ITERS, worded as MAX_ITERS= is refused
    (lib/config/kconfig.py): Kconfig's integer syntax (ASCII digits, so not " 5" or
    "٣", which int() takes) within the symbol's range."""
    low, high = next(
        (int(lo.str_value), int(hi.str_value))
        for lo, hi, cond in sym.ranges
        if kconfiglib.expr_value(cond)
    )
    allowed = f"allowed: {low} to {high}"
    if not re.fullmatch(r"[0-9]+", value):
        return f"not an integer; {allowed}"
    if len(value.lstrip("0")) > len(str(high)) or not low <= int(value) <= high:
        return f"out of range; {allowed}"  # the length test first: int() of 5,000 digits fails
    return None
