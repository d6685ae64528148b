"""PNG plots of a set of runs: validation loss curves, the LR schedules,
perplexity against sparsity per method, peak memory and throughput per run.

A configuration with several finished seeds (lib/results/seeds.py) is drawn
as one curve: the mean over its seeds with a min-max band, and in the
sparsity plot a point at the mean with sd error bars. Failed and unfinished
seeds are left out of both; configurations of one seed are drawn run by run."""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only; no display needed
import matplotlib.pyplot as plt  # noqa: E402

from lib.results.collect import RunRow  # noqa: E402
from lib.results.seeds import Configuration, configuration_of, configurations  # noqa: E402
from lib.results.stats import spread  # noqa: E402


def _save(fig, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _curve(r: RunRow) -> dict[int, float]:
    c = r.metrics.get("val_loss") or {}
    return dict(zip(c.get("iters") or [], c.get("values") or []))


Band = tuple[list[int], list[float], list[float], list[float], int]


def _seed_band(c: Configuration) -> Band:
    """(iterations, mean, min, max, seeds) over the finished seeds' validation curves, at
    the iterations every one of them evaluated (so each point has the same seeds);
    empty below two curves."""
    curves = [k for r in c.done.values() if (k := _curve(r))]
    if len(c.runs) < 2 or len(curves) < 2:
        return [], [], [], [], 0
    iters = sorted(set.intersection(*(set(k) for k in curves)))
    points = [[k[i] for k in curves] for i in iters]
    return (iters, [sum(p) / len(p) for p in points], [min(p) for p in points],
            [max(p) for p in points], len(curves))


def val_loss(rows: list[RunRow], path: Path) -> Path | None:
    drawn = False
    fig, ax = plt.subplots(figsize=(8, 5))
    for c in configurations(rows):
        iters, mean, low, high, n = _seed_band(c)
        if iters:
            line, = ax.plot(iters, mean, marker=".", label=f"{c.key} (mean of {n} seeds)")
            ax.fill_between(iters, low, high, color=line.get_color(), alpha=0.2, linewidth=0)
            drawn = True
            continue
        for r in c.runs.values():
            curve = r.metrics.get("val_loss") or {}
            if curve.get("iters"):
                ax.plot(curve["iters"], curve["values"], marker=".", label=r.run_id)
                drawn = True
    if not drawn:
        plt.close(fig)
        return None
    ax.set(xlabel="iteration", ylabel="validation loss (nats/token)", title="Validation loss")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    return _save(fig, path)


def lr_curves(rows: list[RunRow], path: Path) -> Path | None:
    """The logged LR against the step, one line per configuration (its seeds
    share the schedule), labelled with the schedule metrics.json names."""
    fig, ax = plt.subplots(figsize=(8, 4))
    drawn = False
    for c in configurations(rows):
        for r in c.runs.values():
            curve = r.metrics.get("lr") or {}
            if curve.get("iters"):
                schedule = r.metrics.get("lr_schedule")
                name = schedule.get("name") if isinstance(schedule, dict) else None
                ax.plot(curve["iters"], curve["values"],
                        label=f"{c.key} ({name})" if name else c.key)
                drawn = True
                break
    if not drawn:
        plt.close(fig)
        return None
    ax.set(xlabel="iteration", ylabel="learning rate", title="Learning rate schedule")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    return _save(fig, path)


def _method(r: RunRow) -> str:
    label = f"{r.optimizer} {r.pruning}"
    return label + (f" {r.variant}" if r.variant and r.variant != "vanilla" else "")


def _measured(r: RunRow) -> float:
    return 100 * (r.sparsity if r.sparsity is not None else r.sparsity_target or 0)


def _point(c: Configuration) -> tuple[float, float, float, float | None] | None:
    """(target to order by, sparsity %, best perplexity, its sd or None): the
    mean over the finished seeds of a seeded configuration, else the one run."""
    if len(c.runs) > 1:
        done = [r for r in c.done.values() if r.best_ppl is not None]
        if not done:
            return None
        s = spread([r.best_ppl for r in done])
        assert s.mean is not None
        return (done[0].sparsity_target or 0, sum(map(_measured, done)) / len(done), s.mean, s.sd)
    (r,) = c.runs.values()
    return None if r.best_ppl is None else (r.sparsity_target or 0, _measured(r), r.best_ppl, None)


def ppl_vs_sparsity(rows: list[RunRow], baselines: dict[str, RunRow], path: Path) -> Path | None:
    configs = configurations(rows)
    methods: dict[str, list[tuple[float, float, float, float | None]]] = {}
    for c in configs:
        first = next(iter(c.runs.values()))
        if first.pruning != "none" and (point := _point(c)) is not None:
            methods.setdefault(_method(first), []).append(point)
    if not methods:
        return None
    fig, ax = plt.subplots(figsize=(7, 5))
    for name, points in methods.items():
        points.sort(key=lambda p: p[0])
        xs, ys = [p[1] for p in points], [p[2] for p in points]
        if any(p[3] is not None for p in points):
            ax.errorbar(xs, ys, yerr=[p[3] or 0.0 for p in points], marker="o", capsize=3,
                        label=f"{name} (mean ± sd over seeds)")
        else:
            ax.plot(xs, ys, marker="o", label=name)
    for base in baselines.values():
        seeded = configuration_of(configs, base)
        point = _point(seeded) if seeded is not None and len(seeded.runs) > 1 else None
        if point is not None and seeded is not None:
            what = "mean ± sd" if point[3] is not None else "mean"
            ax.axhline(point[2], linestyle="--", color="grey",
                       label=f"{seeded.key} (dense, {what})")
            if point[3] is not None:
                ax.axhspan(point[2] - point[3], point[2] + point[3], color="grey", alpha=0.15)
        elif base.best_ppl is not None:  # a baseline named by BASELINE= may have no result yet
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
        lr_curves(rows, out / "lr.png"),
        ppl_vs_sparsity(rows, baselines, out / "ppl_vs_sparsity.png"),
        _bars(rows, [r.peak_memory_mb / 1024 if r.peak_memory_mb else None for r in rows],
              "peak memory (GiB)", "Peak memory per run", out / "memory.png"),
        _bars(rows, [r.tokens_per_sec for r in rows], "training tokens/s",
              "Throughput per run", out / "throughput.png"),
    ]
    return [p for p in made if p is not None]
