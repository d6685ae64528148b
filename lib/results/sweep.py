"""A sweep's extra results: runs ranked by best perplexity with their swept
values, and the metric plotted against each swept symbol."""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from lib.results.collect import RunRow  # noqa: E402


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def ranking(rows: list[RunRow], params: list[str]) -> str:
    """Markdown: completed runs by best validation perplexity, best first."""
    ranked = sorted((r for r in rows if r.best_ppl is not None), key=lambda r: r.best_ppl)
    lines = ["## Sweep ranking", "",
             "| rank | run | " + " | ".join(params) + " | best ppl | final ppl | status |",
             "|---|---|" + "---|" * len(params) + "---|---|---|"]
    for i, r in enumerate(ranked, 1):
        values = " | ".join(r.overrides.get(p, "-") for p in params)
        final = f"{r.final_ppl:.2f}" if r.final_ppl is not None else "-"
        lines.append(f"| {i} | {r.run_id} | {values} | {r.best_ppl:.2f} | {final} | {r.status} |")
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
        fig, ax = plt.subplots(figsize=(6, 4))
        numeric = [(_number(v), y) for v, y in points]
        if all(x is not None for x, _ in numeric):
            ax.scatter([x for x, _ in numeric], [y for _, y in numeric])
            if p in log or (min(x for x, _ in numeric) > 0
                            and max(x for x, _ in numeric) / min(x for x, _ in numeric) >= 100):
                ax.set_xscale("log")
        else:  # a choice or string: one column per value
            labels = sorted({v for v, _ in points})
            ax.scatter([labels.index(v) for v, _ in points], [y for _, y in points])
            ax.set_xticks(range(len(labels)), labels)
        ax.set(xlabel=p, ylabel="best validation perplexity", title=f"Sweep: {p}")
        ax.grid(alpha=0.3)
        fig.tight_layout()
        path = out / f"sweep_{p.lower()}.png"
        fig.savefig(path, dpi=120)
        plt.close(fig)
        made.append(path)
    return made
