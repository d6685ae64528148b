"""PNG plots of a set of runs: validation loss curves, perplexity against
sparsity per method, peak memory and throughput per run."""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only; no display needed
import matplotlib.pyplot as plt  # noqa: E402

from lib.results.collect import RunRow  # noqa: E402


def _save(fig, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def val_loss(rows: list[RunRow], path: Path) -> Path | None:
    curves = [(r, r.metrics.get("val_loss") or {}) for r in rows]
    curves = [(r, c) for r, c in curves if c.get("iters")]
    if not curves:
        return None
    fig, ax = plt.subplots(figsize=(8, 5))
    for r, c in curves:
        ax.plot(c["iters"], c["values"], marker=".", label=r.run_id)
    ax.set(xlabel="iteration", ylabel="validation loss (nats/token)", title="Validation loss")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    return _save(fig, path)


def _method(r: RunRow) -> str:
    label = f"{r.optimizer} {r.pruning}"
    return label + (f" {r.variant}" if r.variant and r.variant != "vanilla" else "")


def ppl_vs_sparsity(rows: list[RunRow], baselines: dict[str, RunRow], path: Path) -> Path | None:
    # per method: (target sparsity to order by, measured sparsity %, best perplexity)
    methods: dict[str, list[tuple[float, float, float]]] = {}
    for r in rows:
        if r.pruning != "none" and r.best_ppl is not None:
            measured = r.sparsity if r.sparsity is not None else r.sparsity_target or 0
            methods.setdefault(_method(r), []).append(
                (r.sparsity_target or 0, 100 * measured, r.best_ppl))
    if not methods:
        return None
    fig, ax = plt.subplots(figsize=(7, 5))
    for name, points in methods.items():
        points.sort(key=lambda p: p[0])
        ax.plot([x for _, x, _ in points], [y for _, _, y in points], marker="o", label=name)
    for base in baselines.values():
        if base.best_ppl is not None:  # a baseline named by BASELINE= may have no result yet
            ax.axhline(base.best_ppl, linestyle="--", color="grey",
                       label=f"{base.run_id} (dense)")
    ax.set(xlabel="sparsity (%)", ylabel="best validation perplexity",
           title="Perplexity vs sparsity")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    return _save(fig, path)


def _bars(rows: list[RunRow], values: list[float | None], xlabel: str, title: str,
          path: Path) -> Path | None:
    pairs = [(r.run_id, v) for r, v in zip(rows, values) if v is not None]
    if not pairs:
        return None
    fig, ax = plt.subplots(figsize=(8, 0.4 * len(pairs) + 1.5))
    ax.barh([p[0] for p in pairs], [p[1] for p in pairs], color="tab:blue")
    ax.invert_yaxis()
    ax.set(xlabel=xlabel, title=title)
    ax.grid(axis="x", alpha=0.3)
    ax.tick_params(axis="y", labelsize=7)
    return _save(fig, path)


def write_all(rows: list[RunRow], baselines: dict[str, RunRow], out: Path) -> list[Path]:
    made = [
        val_loss(rows, out / "val_loss.png"),
        ppl_vs_sparsity(rows, baselines, out / "ppl_vs_sparsity.png"),
        _bars(rows, [r.peak_memory_mb / 1024 if r.peak_memory_mb else None for r in rows],
              "peak memory (GiB)", "Peak memory per run", out / "memory.png"),
        _bars(rows, [r.tokens_per_sec for r in rows], "training tokens/s",
              "Throughput per run", out / "throughput.png"),
    ]
    return [p for p in made if p is not None]
