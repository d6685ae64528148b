"""Which stages `make gpu-check` runs, in what order, within what time.

The order converges over short windows (order_stages): first the fixes to
verify, stages whose last finished record failed or missed a goal
(goals.py) and whose code changed since (each stage's `paths`, compared by
git against that record's commit); then stages that never finished on this
kind of GPU; then the other stages whose code changed since their last
finished record; then the rest, the longest unchecked first. Finished means
done or failed, not cut short by the cap; a stage cut short keeps its figures
and, while its code stays the same, the next run resumes from them.

Each stage has its own time cap (seconds; the CPU ones cover the tiny shapes
on 2 busy shared cores). The scheduler never starts a stage whose cap would
overrun what is left of the budget: it is recorded skipped, and a later,
shorter stage may still run. A `flexible` stage instead takes what is left,
if at least its minimum. DEFAULT_BUDGET_S is what a 10-minute allocation
holds after the node's set-up (wheels, imports, packing the compile caches).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from lib.bench.gpucheck.goals import missed

DEFAULT_BUDGET_S = 540.0

# What most stages exercise: the configuration, the model families, the trainer.
_CORE = (
    "lib/config",
    "lib/model",
    "lib/hardware",
    "lib/speed",
    "gpt2",
    "hamt",
    "Kconfig",
    "lib/Kconfig",
)
_SHAPES = "lib/bench/gpucheck/settings.py"
_STAGES_PY = "lib/bench/gpucheck/stages.py"


@dataclass(frozen=True)
class Stage:
    name: str
    title: str
    gpu_cap_s: float
    cpu_cap_s: float
    # The files whose change makes a finished figure stale: folders or files;
    # "!path" leaves one out; the longest matching entry decides.
    paths: tuple[str, ...] = ()
    flexible_min_s: float = 0.0  # > 0: run with whatever is left, if at least this

    def cap(self, device: str) -> float:
        return self.gpu_cap_s if device == "cuda" else self.cpu_cap_s

    def exercises(self, path: str) -> bool:
        best: tuple[int, bool] | None = None
        for entry in self.paths:
            left_out = entry.startswith("!")
            prefix = entry.lstrip("!").rstrip("/")
            if path == prefix or path.startswith(prefix + "/"):
                if best is None or len(prefix) > best[0]:
                    best = (len(prefix), not left_out)
        return bool(best and best[1])


STAGES: dict[str, Stage] = {
    s.name: s
    for s in (
        # The caps sum to 990 s: every stage within two default windows.
        Stage(
            "a",
            "GPU tests (pytest -m gpu), one result per test",
            150,
            40,
            ("lib", "gpt2", "hamt", "tests", "requirements-gpu.txt")
            + ("!lib/bench", "!lib/results", "!lib/matrix", "!lib/eval", "!lib/tune")
            + ("lib/bench/gpucheck/gputests.py", "lib/bench/gpucheck/testlog.py"),
        ),
        Stage(
            "b",
            "GPT-2 124M trainer step against a plain loop, then what could reach 50 % MFU",
            240,
            60,
            _CORE
            + ("lib/train", "lib/optim", "lib/data", "lib/bench/step.py", _SHAPES)
            + (_STAGES_PY, "defconfigs/gpt2-vanilla-baseline"),
        ),
        Stage(
            "c",
            "reference configuration gpt2-spam-magnitude-50: peak memory and estimate",
            90,
            30,
            _CORE
            + ("lib/train", "lib/optim", "lib/prune", "lib/estimate", "lib/data", _SHAPES)
            + (_STAGES_PY, "defconfigs/gpt2-spam-magnitude-50"),
        ),
        Stage(
            "d",
            "bench-optim: AdamWSPAM and AdamWPrune against fused AdamW, 16x1 and 32x4",
            150,
            45,
            _CORE
            + ("lib/train", "lib/optim", "lib/prune", "lib/bench/optimizers.py", _SHAPES)
            + ("lib/bench/step.py", _STAGES_PY, "defconfigs/gpt2-spam-magnitude-50"),
        ),
        Stage(
            "e",
            "bench-seqlen: vanilla against HAMT at 2048 and 8192",
            180,
            60,
            _CORE
            + ("lib/bench/seqlen.py", "lib/bench/models.py", "lib/bench/step.py")
            + (_SHAPES, _STAGES_PY, "defconfigs/gpt2-vanilla-baseline", "defconfigs/hamt-small"),
        ),
        Stage(
            "f",
            "speed options, bench-inference on a tiny run, tiny matrix packed vs 1",
            180,
            240,
            _CORE
            + ("lib", "scripts", "Makefile", "defconfigs/gpt2-tiny-shakespeare")
            + ("!lib/bench/gpucheck", "lib/bench/gpucheck/runs.py", _SHAPES, "!lib/results"),
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


@dataclass
class History:
    """What the filed records of one kind of GPU say about one stage: its
    newest finished run and a newer run cut short, each as {"commit", "date",
    "stage": the stage's record}."""

    finished: dict[str, Any] | None = None
    partial: dict[str, Any] | None = None


@dataclass
class Planned:
    name: str
    # 0 a fix to verify (its finished run failed or missed a goal, and its code
    # changed since), 1 never finished, 2 changed since its finished run, 3 the rest
    group: int
    reason: str
    resume: dict[str, Any] | None = None  # the figures of a partial run to go on from


def _stale(stage: Stage, changed: set[str] | None) -> list[str] | None:
    """The changed files the stage exercises; None when git cannot tell (all stale)."""
    if changed is None:
        return None
    return sorted(f for f in changed if stage.exercises(f))


def order_stages(
    history: dict[str, History],
    changed_since: Callable[[str], set[str] | None],
    names: Iterable[str] | None = None,
) -> list[Planned]:
    """The stages (all, or `names` in their given order) in the converging
    order, each with why it is there and, when its code is unchanged since a
    run cut short, that run's figures to resume from. changed_since(commit)
    gives the files changed since commit, or None when it cannot tell."""
    explicit = names is not None
    planned = []
    for name in names if names is not None else STAGES:
        stage, h = STAGES[name], history.get(name, History())
        resume = None
        if h.partial is not None and _stale(stage, changed_since(h.partial["commit"])) == []:
            resume = h.partial["stage"].get("figures") or None
        if h.finished is None:
            group, reason = 1, "no finished run on this kind of device"
        else:
            stale = _stale(stage, changed_since(h.finished["commit"]))
            at = f"`{h.finished['commit'][:8]}` ({h.finished['date'][:10]})"
            if stale is None:
                group, reason = 2, f"finished at {at}, which git here cannot compare"
            elif stale:
                more = f" and {len(stale) - 1} more" if len(stale) > 1 else ""
                group, reason = 2, f"{stale[0]}{more} changed since its finished run at {at}"
                if misses := missed(name, h.finished["stage"]):
                    # What changed may be the fix: checking it comes before new figures.
                    group, reason = 0, f"a fix to verify: missed {'; '.join(misses)}; {reason}"
            else:
                group, reason = 3, f"unchanged since its finished run at {at}"
        if resume is not None:
            reason += f"; resumes the run cut short on {h.partial['date'][:16]}"  # type: ignore[index]
        planned.append(Planned(name, group, reason, resume))
    if explicit:
        return planned
    oldest = {n: (history[n].finished or {}).get("date", "") for n in history}
    return sorted(planned, key=lambda p: (p.group, oldest.get(p.name, "") if p.group == 3 else ""))


def expected(order: list[str], device: str, budget_s: float) -> tuple[list[str], list[str]]:
    """(the stages sure to start if each takes its whole cap, those that start
    only if earlier ones end sooner)."""
    now = [0.0]

    def take_cap(stage: Stage, cap: float) -> dict[str, Any]:
        now[0] += cap
        return {"status": "done"}

    records = schedule(order, device, budget_s, take_cap, lambda: now[0])
    sure = [n for n in order if records[n]["status"] != "skipped"]
    return sure, [n for n in order if n not in sure]


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
