"""A sweep's extra results: runs ranked by best perplexity with their swept
values, and the metric plotted against each swept symbol."""

from __future__ import annotations

from pathlib import Path

from lib.results import style
from lib.results.collect import RunRow


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def ranking(rows: list[RunRow], params: list[str]) -> str:
    """Markdown: completed runs by best validation perplexity, best first."""
    ranked = sorted(
        ((r.best_ppl, r) for r in rows if r.best_ppl is not None), key=lambda pair: pair[0]
    )
    lines = [
        "## Sweep ranking",
        "",
        "| rank | run | " + " | ".join(params) + " | best ppl | final ppl | status |",
        "|---|---|" + "---|" * len(params) + "---|---|---|",
    ]
    for i, (best, r) in enumerate(ranked, 1):
        values = " | ".join(r.overrides.get(p, "-") for p in params)
        final = f"{r.final_ppl:.2f}" if r.final_ppl is not None else "-"
        lines.append(f"| {i} | {r.run_id} | {values} | {best:.2f} | {final} | {r.status} |")
    missing = [r.run_id for r in rows if r.best_ppl is None]
    if missing:
        lines += ["", f"Not ranked (no validation result yet): {', '.join(missing)}"]
    return "\n".join(lines) + "\n"


def plots(rows: list[RunRow], params: list[str], log: list[str], out: Path) -> list[Path]:
    """sweep_<symbol>.png: best perplexity against each swept value."""
    made = []
    for p in params:
        points = [(r.overrides.get(p, ""), r.best_ppl) for r in rows if r.best_ppl is not None]
        if not points:
            continue
        fig, ax = style.new_figure()
        ys = [y for _, y in points]
        xs = [x for x in (_number(v) for v, _ in points) if x is not None]
        if len(xs) == len(points):  # every swept value is a number
            ax.scatter(xs, ys)
            if p in log or (min(xs) > 0 and max(xs) / min(xs) >= 100):
                ax.set_xscale("log")
        else:  # a choice or string: one column per value
            labels = sorted({v for v, _ in points})
            ax.scatter([labels.index(v) for v, _ in points], ys)
            ax.set_xticks(range(len(labels)), labels)
        style.label_axes(ax, p, "best validation perplexity", f"Sweep: {p}")
        made.append(style.save(fig, out / f"sweep_{p.lower()}.png"))
    return made
