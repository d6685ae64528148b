"""Which stages `make gpu-check` runs, in what order, within what time.

Each stage has its own time cap (seconds; the GPU figures are generous
guesses to be tightened from the first records; the CPU ones cover the tiny
shapes on 2 busy shared cores, and sum to under DEFAULT_BUDGET_S). The scheduler never starts a stage whose cap
would overrun what is left of the total budget: it is recorded skipped, and
a later, shorter stage may still run. A `flexible` stage (the speed-option
runs) instead takes what is left, if at least its minimum, and reports the
items it reached.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

DEFAULT_BUDGET_S = 480.0


@dataclass(frozen=True)
class Stage:
    name: str
    title: str
    gpu_cap_s: float
    cpu_cap_s: float
    flexible_min_s: float = 0.0  # > 0: run with whatever is left, if at least this

    def cap(self, device: str) -> float:
        return self.gpu_cap_s if device == "cuda" else self.cpu_cap_s


STAGES: dict[str, Stage] = {
    s.name: s
    for s in (
        # On an H200 (2026-11-26) the 27 GPU tests outran 150 s, and e outran 180 s
        # (each length compiles both models afresh); a and e fit one default budget.
        Stage("a", "GPU tests (pytest -m gpu)", 200, 40),
        Stage("b", "GPT-2 124M trainer step, micro-batch 16 and 32, against a plain loop", 180, 45),
        Stage(
            "c", "reference configuration gpt2-spam-magnitude-50: peak memory and estimate", 90, 30
        ),
        Stage(
            "d", "bench-optim: AdamWSPAM and AdamWPrune against fused AdamW, 16x1 and 32x4", 150, 45
        ),
        Stage("e", "bench-seqlen: vanilla against HAMT at 2048 and 8192", 270, 60),
        Stage(
            "f",
            "speed options, bench-inference on a tiny run, tiny matrix packed vs 1",
            420,
            240,
            flexible_min_s=60,
        ),
    )
}


def parse_stages(text: str | None) -> list[str] | None:
    """STAGES="a,c" or "ac" -> ["a", "c"]; None or blank -> None (the default order)."""
    if not text or not text.strip():
        return None
    names = [c for c in text.replace(",", " ").replace(" ", "")]
    unknown = [n for n in names if n not in STAGES]
    if unknown:
        raise ValueError(
            f"STAGES={text!r}: unknown stage {', '.join(unknown)}; the stages are "
            + "; ".join(f"{s.name}: {s.title}" for s in STAGES.values())
        )
    return list(dict.fromkeys(names))


def default_order(measured: Iterable[str]) -> list[str]:
    """Every stage, those without a record at this code first (each group in a..f order)."""
    done = set(measured)
    return [n for n in STAGES if n not in done] + [n for n in STAGES if n in done]


def schedule(
    order: list[str],
    device: str,
    budget_s: float,
    run: Callable[[Stage, float], dict[str, Any]],
    clock: Callable[[], float] = time.monotonic,
) -> dict[str, dict[str, Any]]:
    """Run the stages of `order` through run(stage, cap_s) -> record; a stage
    whose cap exceeds the time left is recorded skipped instead."""
    start = clock()
    records: dict[str, dict[str, Any]] = {}
    for name in order:
        stage = STAGES[name]
        left = budget_s - (clock() - start)
        cap = stage.cap(device)
        if stage.flexible_min_s and left >= min(cap, stage.flexible_min_s):
            cap = min(cap, left)
        if cap > left:
            records[name] = {
                "status": "skipped",
                "seconds": 0.0,
                "cap_s": cap,
                "reason": f"its cap of {cap:.0f} s would overrun the "
                f"{max(left, 0):.0f} s left of the budget",
            }
            continue
        began = clock()
        record = run(stage, cap)
        records[name] = {**record, "cap_s": cap, "seconds": round(clock() - began, 2)}
    return records
