"""The PNG figures of a set of runs: training and validation loss and the LR
schedule (lib/results/curves.py), perplexity against sparsity per method, and
peak memory and throughput per configuration.

Configurations are named as lib/results/labels.py names them. A configuration
with several finished seeds is one point or bar at the mean over its seeds,
with sd error bars; failed and unfinished seeds are left out. Points of
different methods at the same target sparsity are set side by side, so their
error bars never overlap."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from matplotlib.figure import Figure

from lib.results import curves, labels, style
from lib.results.collect import RunRow
from lib.results.seeds import Configuration, configuration_of, configurations
from lib.results.stats import spread
from lib.results.tuning import Tuning

CAPSIZE = 4  # points, each side of an error bar


@dataclass
class Point:
    target: float  # target sparsity in %: the column the point stands in
    mean: float
    sd: float | None  # over seeds; None for one run


def _point(c: Configuration) -> Point | None:
    """Best perplexity: the mean over the finished seeds of a seeded configuration,
    else the one run."""
    runs = (
        [r for r in c.done.values() if r.best_ppl is not None]
        if len(c.runs) > 1
        else [r for r in c.runs.values() if r.best_ppl is not None]
    )
    if not runs:
        return None
    s = spread([r.best_ppl for r in runs])
    assert s.mean is not None
    target = runs[0].sparsity_target
    measured = runs[0].sparsity
    return Point(100 * (target if target is not None else measured or 0.0), s.mean, s.sd)


def _dodge(targets: list[float], methods: int) -> float:
    """The x step between methods at one target: a quarter of the narrowest gap
    between targets shared out, at most 2.5 points of sparsity."""
    gaps = [b - a for a, b in zip(targets, targets[1:])]
    return min(2.5, 0.5 * min(gaps, default=40.0) / max(methods, 1))


def ppl_vs_sparsity(rows: list[RunRow], baselines: dict[str, RunRow]) -> Figure | None:
    configs = configurations(rows)
    with_model = len({c.model for c in configs}) > 1
    methods: dict[str, list[Point]] = {}
    for c in configs:
        first = next(iter(c.runs.values()))
        if first.pruning != "none" and (point := _point(c)) is not None:
            methods.setdefault(labels.method(first, with_model) or c.key, []).append(point)
    if not methods:
        return None
    targets = sorted({p.target for points in methods.values() for p in points})
    step = _dodge(targets, len(methods))
    fig, ax = style.new_figure()
    for i, (name, points) in enumerate(methods.items()):
        points.sort(key=lambda p: p.target)
        shift = (i - (len(methods) - 1) / 2) * step
        seeded = any(p.sd is not None for p in points)
        look = style.series(i)
        ax.errorbar(
            [p.target + shift for p in points],
            [p.mean for p in points],
            yerr=[p.sd or 0.0 for p in points] if seeded else None,
            marker=look["marker"],
            color=look["color"],
            linestyle=look["linestyle"],
            capsize=CAPSIZE,
            markersize=6,
            label=name,
        )
    _baselines(ax, configs, baselines)
    ax.set_xticks(targets, [f"{t:g}" for t in targets])
    pad = max(5.0, step * len(methods))
    ax.set_xlim(targets[0] - pad, targets[-1] + pad)
    seeded = any(p.sd is not None for points in methods.values() for p in points)
    low = ax.get_ylim()[0]
    style.label_axes(
        ax,
        "target sparsity (%)"
        + ("; methods set side by side at each target" if len(methods) > 1 else ""),
        "best validation perplexity" + (f" (axis from {low:.3g}, not 0)" if low > 0 else ""),
        "Perplexity vs sparsity" + (" (mean ± sd over seeds)" if seeded else ""),
    )
    style.legend_outside(ax)
    return fig


def _baselines(ax, configs: list[Configuration], baselines: dict[str, RunRow]) -> None:
    names = labels.names(configs)
    for base in baselines.values():
        c = configuration_of(configs, base)
        point = _point(c) if c is not None else None
        if point is None and base.best_ppl is not None:  # named by BASELINE=, outside the set
            point = Point(0.0, base.best_ppl, None)
        if point is None:
            continue
        name = names[c.key] if c is not None else base.run_id
        what = ", mean ± sd" if point.sd is not None else ""
        ax.axhline(point.mean, linestyle="--", color="grey", label=f"{name} (baseline{what})")
        if point.sd is not None:
            ax.axhspan(point.mean - point.sd, point.mean + point.sd, color="grey", alpha=0.15)


def _per_config(
    rows: list[RunRow], value: Callable[[RunRow], float | None]
) -> list[tuple[str, float, float | None]]:
    """(name, mean, sd or None) of each configuration with the value: over its
    finished seeds, or its one run whatever its state."""
    configs = configurations(rows)
    names = labels.names(configs)
    out = []
    for c in configs:
        runs = c.done.values() if len(c.runs) > 1 else c.runs.values()
        s = spread([v for r in runs if (v := value(r)) is not None])
        if s.mean is not None:
            out.append((names[c.key], s.mean, s.sd))
    return out


def bars(
    rows: list[RunRow], value: Callable[[RunRow], float | None], xlabel: str, title: str
) -> Figure | None:
    entries = _per_config(rows, value)
    if not entries:
        return None
    fig, ax = style.new_figure(0.32 * len(entries) + 1.3)
    seeded = any(sd is not None for _, _, sd in entries)
    ax.barh(
        [style.wrap(n) for n, _, _ in entries],
        [m for _, m, _ in entries],
        xerr=[sd or 0.0 for _, _, sd in entries] if seeded else None,
        capsize=CAPSIZE if seeded else 0,
        color=style.COLOURS[0],
    )
    ax.invert_yaxis()
    ax.grid(axis="y", visible=False)
    style.label_axes(ax, xlabel + (" (mean ± sd over seeds)" if seeded else ""), "", title)
    return fig


PRUNED = "pruned trial (its last reported loss)"


def tuning_curve(tuning: Tuning, names: dict[str, str]) -> Figure | None:
    """Each trial's validation loss against the value it tried, one panel per tuned
    symbol (a log axis for a log range), a marker colour per configuration (names:
    configuration key -> name); a pruned trial is an x at the last loss it reported,
    each configuration's best trial ringed. Failed and running trials are left out."""
    symbols: dict[str, bool] = {}  # name -> log axis
    for s in tuning.studies:
        for sym in s.symbols:
            symbols.setdefault(sym.name, sym.log)
    drawn = [
        s
        for s in tuning.studies
        if any(
            t.params and t.value is not None and t.state in ("complete", "pruned") for t in s.trials
        )
    ]
    if not drawn or not symbols:
        return None
    fig, axes = style.new_panels(len(symbols))
    metric = (
        "val_loss_per_char"
        if any(s.budget.get("metric") == "val_loss_per_char" for s in drawn)
        else "val_loss"
    )
    unit = "nats/char" if metric == "val_loss_per_char" else "nats/token"
    for ax, (symbol, log) in zip(axes, symbols.items()):
        for i, s in enumerate(drawn):
            look = style.series(i)
            done = [
                (t.params[symbol], t.value, t.number == s.best_trial)
                for t in s.trials
                if t.state == "complete" and symbol in t.params and t.value is not None
            ]
            cut = [
                (t.params[symbol], t.value)
                for t in s.trials
                if t.state == "pruned" and symbol in t.params and t.value is not None
            ]
            name = names.get(s.config, s.config)
            if done:
                ax.plot(
                    [x for x, _, _ in done],
                    [y for _, y, _ in done],
                    look["marker"],
                    color=look["color"],
                    markersize=6,
                    label=name,
                )
                best = [(x, y) for x, y, b in done if b]
                ax.plot(
                    [x for x, _ in best],
                    [y for _, y in best],
                    "o",
                    markersize=12,
                    markerfacecolor="none",
                    markeredgecolor=look["color"],
                    label="_best",
                )
            if cut:
                ax.plot(
                    [x for x, _ in cut],
                    [y for _, y in cut],
                    "x",
                    color=look["color"],
                    markersize=7,
                    label="_pruned" if done else name,
                )
        if log:
            ax.set_xscale("log")
        style.label_axes(
            ax, symbol + (" (log scale)" if log else ""), f"validation loss ({unit})", ""
        )
    first = axes[0]
    if any(t.state == "pruned" for s in drawn for t in s.trials):
        first.plot([], [], "x", color="grey", markersize=7, label=PRUNED)  # the legend's key
    first.plot(
        [],
        [],
        "o",
        markersize=12,
        markerfacecolor="none",
        markeredgecolor="grey",
        label="best trial of its configuration",
    )
    fig.suptitle("Tuning: each trial's validation loss against its tuned value", fontsize=11)
    style.legend_outside(axes[-1] if len(axes) > 1 else first, handles_from=first)
    return fig


def _load(rows: list[RunRow]) -> str:
    """How loaded the CPU was that the CPU runs shared, from their records."""
    loads = [
        load
        for r in rows
        if r.metrics.get("device") == "cpu"
        and isinstance(load := r.metrics.get("load_average"), int | float)
    ]
    cores = {c for r in rows if isinstance(c := r.metrics.get("cpu_count"), int)}
    if not loads:
        return "measured on a shared CPU"
    where = f" on {next(iter(cores))} cores" if len(cores) == 1 else ""
    span = (
        f"{min(loads):.1f}" if min(loads) == max(loads) else f"{min(loads):.1f} to {max(loads):.1f}"
    )
    return f"measured on a shared CPU, load average {span}{where}"


def figures(
    rows: list[RunRow], baselines: dict[str, RunRow], tuning: Tuning | None = None
) -> dict[str, Figure]:
    """File name -> figure, for each figure the runs (and a tuned matrix's
    studies) have data for."""
    cpu = any(r.metrics.get("device") == "cpu" for r in rows)
    made = {
        "train_loss.png": curves.loss_curves(
            rows, "train_loss", "training loss (nats/token)", "Training loss"
        ),
        "val_loss.png": curves.loss_curves(
            rows, "val_loss", "validation loss (nats/token)", "Validation loss"
        ),
        "lr.png": curves.lr_curves(rows),
        "ppl_vs_sparsity.png": ppl_vs_sparsity(rows, baselines),
        "memory.png": bars(
            rows,
            lambda r: r.peak_memory_mb / 1024 if r.peak_memory_mb else None,
            "peak memory (GiB)" + ("; on a CPU: the process's peak RSS" if cpu else ""),
            "Peak memory",
        ),
        "throughput.png": bars(
            rows,
            lambda r: r.tokens_per_sec,
            "training tokens/s",
            "Training throughput" + (f" ({_load(rows)})" if cpu else ""),
        ),
    }
    if tuning:
        made["tuning_curve.png"] = tuning_curve(tuning, labels.names(configurations(rows)))
    return {name: fig for name, fig in made.items() if fig is not None}


def write_all(
    rows: list[RunRow], baselines: dict[str, RunRow], out: Path, tuning: Tuning | None = None
) -> list[Path]:
    return [style.save(fig, out / name) for name, fig in figures(rows, baselines, tuning).items()]
