"""Sparsity schedule: how much of the prunable weight is masked at each step.

Nothing is pruned up to `warmup`; sparsity then ramps to `target` at
`ramp_end` and stays there. With progress p = (step - warmup) / (ramp_end - warmup):

* "linear": s = target * p
* "cubic":  s = target * (1 - (1 - p)^3), the gradual-pruning schedule of
  Zhu & Gupta 2017 ("To prune, or not to prune", arXiv 1710.01878, eq. 1
  with initial sparsity 0). It prunes fastest at the start of the ramp,
  while the network is still plastic enough to recover, and slows down as
  fewer redundant weights remain.
* "cubic_late": s = target * p^3, what AdamWPrune calls "cubic" and uses
  for every state variant (mcgrof/knlp 041ec5f2, update_adamprune_masks):
  the mirror image, pruning slowly first and fastest at the end of the ramp.

Masks are re-chosen after step warmup + k*frequency and at ramp_end
(is_update_step), never after it: masks only grow and the count at the
target is already exact, so a later re-selection at the same sparsity could
change nothing. Under knlp's movement rule (reselect.py) masks are chosen
afresh, so updates go on past ramp_end.
"""

from __future__ import annotations

KINDS = ("linear", "cubic", "cubic_late")


def check_schedule(*, target: float, warmup: int, ramp_end: int, kind: str) -> None:
    """Raise ValueError naming the first invalid argument."""
    if isinstance(target, bool) or not isinstance(target, (int, float)) or not 0.0 <= target < 1.0:
        raise ValueError(f"target={target!r} is invalid: it must satisfy 0 <= target < 1")
    for name, value in (("warmup", warmup), ("ramp_end", ramp_end)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{name}={value!r} is invalid: it must be an integer step")
    if warmup < 0:
        raise ValueError(f"warmup={warmup} is invalid: it must be >= 0")
    if ramp_end <= warmup:
        raise ValueError(f"ramp_end={ramp_end} is invalid: it must be > warmup ({warmup})")
    if kind not in KINDS:
        raise ValueError(f"kind={kind!r} is invalid: it must be one of {', '.join(KINDS)}")


def sparsity_at(step: int, *, target: float, warmup: int, ramp_end: int, kind: str) -> float:
    """Scheduled sparsity after `step` optimizer steps (0 up to warmup, target from ramp_end)."""
    check_schedule(target=target, warmup=warmup, ramp_end=ramp_end, kind=kind)
    if step <= warmup:
        return 0.0
    if step >= ramp_end:
        return float(target)
    progress = (step - warmup) / (ramp_end - warmup)
    if kind == "linear":
        return target * progress
    if kind == "cubic_late":
        return target * progress**3
    return target * (1.0 - (1.0 - progress) ** 3)


def is_update_step(
    step: int, *, warmup: int, ramp_end: int, frequency: int, reselect: bool = False
) -> bool:
    """Whether the masks are re-chosen after `step` (see the module docstring).
    reselect (knlp's movement rule, masks re-chosen from scratch): also past ramp_end,
    every `frequency` steps, since a re-selection there can change masks."""
    if reselect and step > ramp_end:
        return (step - warmup) % frequency == 0
    return warmup < step <= ramp_end and ((step - warmup) % frequency == 0 or step == ramp_end)


def mask_update_steps(
    iters: int,
    *,
    target: float,
    warmup: int,
    ramp_end: int,
    frequency: int,
    kind: str,
    reselect: bool = False,
) -> list[tuple[int, float]]:
    """(step, scheduled sparsity) of every mask update in a run of `iters` steps."""
    return [
        (step, sparsity_at(step, target=target, warmup=warmup, ramp_end=ramp_end, kind=kind))
        for step in range(1, iters + 1)
        if is_update_step(
            step, warmup=warmup, ramp_end=ramp_end, frequency=frequency, reselect=reselect
        )
    ]
