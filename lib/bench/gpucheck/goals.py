"""The GPU goals of issues 18, 19 and 27, judged from a gpu_check.json.

Each goal gives (goal, "met" | "not met" | "not measured", figure). A stage
that did not run, or ran without the figure, leaves its goals not measured.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Judgement = tuple[str, str, str]


def _stage(record: dict[str, Any], name: str) -> dict[str, Any]:
    return record.get("stages", {}).get(name, {}).get("figures") or {}


def _verdict(ok: bool) -> str:
    return "met" if ok else "not met"


def gpu_tests(r: dict[str, Any]) -> Judgement:
    goal = "every GPU test passes"
    counts = _stage(r, "a").get("counts")
    if not counts:
        return goal, "not measured", ""
    figure = f"{counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped"
    unrun = counts.get("not_reached", 0), counts.get("not_collected", 0)
    if unrun[0]:
        figure += f", {unrun[0]} not reached"
    if unrun[1]:
        figure += f", {unrun[1]} files not collected"
    ok = counts["failed"] == 0 and counts["passed"] > 0 and not any(unrun)
    return goal, _verdict(ok), figure


def mfu(r: dict[str, Any]) -> Judgement:
    goal = "trainer step >= 50 % MFU at its best micro-batch"
    rows = {
        k: v
        for k, v in _stage(r, "b").items()
        if k != "best" and isinstance(v, dict) and v.get("mfu") is not None
    }
    if not rows:
        return goal, "not measured", ""
    best = max(rows, key=lambda k: rows[k]["mfu"])
    return goal, _verdict(rows[best]["mfu"] >= 0.5), f"{100 * rows[best]['mfu']:.1f} % at {best}"


def _per_shape(
    r: dict[str, Any],
    goal: str,
    figure: Callable[[dict], tuple[float, str] | None],
    ok: Callable[[float], bool],
) -> Judgement:
    shapes = _stage(r, "d")
    found: dict[str, tuple[float, str]] = {}
    for shape, names in shapes.items():
        if (value := figure(names)) is not None:
            found[shape] = value
    if not found:
        return goal, "not measured", ""
    text = "; ".join(f"{shape}: {text}" for shape, (_, text) in found.items())
    return goal, _verdict(all(ok(v) for v, _ in found.values())), text


def spam(r: dict[str, Any]) -> Judgement:
    def best(names: dict) -> tuple[float, str] | None:
        ratios = {
            n: v["full_step_vs_adamw"]
            for n, v in names.items()
            if n.startswith("adamwspam") and "full_step_vs_adamw" in v
        }
        if not ratios:
            return None
        name = min(ratios, key=lambda n: ratios[n])
        return ratios[name], f"{ratios[name]:.3f}x ({name})"

    return _per_shape(
        r, "AdamWSPAM's whole step within 3 % of fused AdamW's", best, lambda v: v <= 1.03
    )


def masks(r: dict[str, Any]) -> Judgement:
    def share(names: dict) -> tuple[float, str] | None:
        value = names.get("adamwprune", {}).get("mask_share_of_step")
        return None if value is None else (value, f"{100 * value:.2f} %")

    return _per_shape(r, "AdamWPrune's mask work under 1 % of a step", share, lambda v: v < 0.01)


def reference(r: dict[str, Any]) -> list[Judgement]:
    c = _stage(r, "c")
    goals = [
        "reference configuration at or under 25.3 GiB (compiled)",
        "`make estimate` within 5 % of the measured peak",
    ]
    if "measured_gib" not in c:
        return [(g, "not measured", "") for g in goals]
    error = c["estimate_error_percent"]
    return [
        (
            goals[0],
            _verdict(c["measured_gib"] <= c["published_gib"]),
            f"{c['measured_gib']:.2f} GiB",
        ),
        (
            goals[1],
            _verdict(abs(error) <= 5),
            f"estimate {c['estimate_gib']:.2f} GiB, {error:+.1f} %",
        ),
    ]


def hamt(r: dict[str, Any]) -> list[Judgement]:
    rows = {(row["variant"], row["seq_len"]): row for row in _stage(r, "e").get("rows", [])}
    lengths = sorted({t for _, t in rows})
    if len(lengths) < 2:
        return [("HAMT against vanilla (bench-seqlen)", "not measured", "")]
    short, long = lengths[0], lengths[-1]

    def ratio(key: str, t: int, inverse: bool = False) -> float | None:
        h, v = rows.get(("hamt", t), {}), rows.get(("vanilla", t), {})
        if key not in h or key not in v:
            return None
        return v[key] / h[key] if inverse else h[key] / v[key]

    out = []
    for text, key, t, inverse, target in (
        (
            f"HAMT >= 1.0x vanilla's training tokens/s at {short}",
            "train_tokens_per_sec",
            short,
            False,
            1.0,
        ),
        (
            f"HAMT >= 2.0x vanilla's training tokens/s at {long}",
            "train_tokens_per_sec",
            long,
            False,
            2.0,
        ),
        (f"HAMT <= half vanilla's peak memory at {long}", "peak_memory_mb", long, True, 2.0),
        (f"HAMT <= half vanilla's decode ms/token at {long}", "gen_ms_per_token", long, True, 2.0),
    ):
        value = ratio(key, t, inverse)
        out.append(
            (text, "not measured", "")
            if value is None
            else (
                text,
                _verdict(value >= target),
                f"{value:.2f}x" + (" smaller" if inverse else ""),
            )
        )
    return out


def packing(r: dict[str, Any]) -> Judgement:
    goal = "packed tiny runs >= 1.5x the throughput of one run per GPU"
    value = _stage(r, "f").get("packing", {}).get("packed_speedup")
    return (
        (goal, "not measured", "")
        if value is None
        else (goal, _verdict(value >= 1.5), f"{value:.2f}x")
    )


def judge(record: dict[str, Any]) -> list[Judgement]:
    return [
        gpu_tests(record),
        mfu(record),
        spam(record),
        masks(record),
        *reference(record),
        *hamt(record),
        packing(record),
    ]


# The goals each stage's figures decide.
STAGE_GOALS: dict[str, Callable[[dict[str, Any]], list[Judgement]]] = {
    "a": lambda r: [gpu_tests(r)],
    "b": lambda r: [mfu(r)],
    "c": reference,
    "d": lambda r: [spam(r), masks(r)],
    "e": hamt,
    "f": lambda r: [packing(r)],
}


def missed(name: str, stage: dict[str, Any]) -> list[str]:
    """The goals stage `name`'s run shows not met, or its failure (a stage
    that failed missed what it checks)."""
    try:
        judged = STAGE_GOALS.get(name, lambda r: [])({"stages": {name: stage}})
    except (AttributeError, KeyError, TypeError):  # figures of another shape judge nothing
        judged = []
    out = [goal for goal, verdict, _ in judged if verdict == "not met"]
    if stage.get("status") == "failed" and not out:
        out.append("it failed")
    return out
