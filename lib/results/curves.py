"""Line figures against the iteration: training loss, validation loss and the
learning rate.

A configuration with several finished seeds (lib/results/seeds.py) is one
curve: the mean over its seeds with a min-max band, at the iterations every
seed recorded. Failed and unfinished seeds are left out; configurations of
one seed are drawn run by run. A series of few points gets a marker on each;
where every series has one point (one evaluation per run), each configuration
gets its own row with a marker, not a dot stacked on the others at one step."""

from __future__ import annotations

from dataclasses import dataclass

from matplotlib.axes import Axes
from matplotlib.figure import Figure

from lib.results import labels, style
from lib.results.collect import FINISHED, RunRow
from lib.results.seeds import Configuration, configurations

FEW = 25  # series of at most this many points are drawn with markers

Band = tuple[list[int], list[float], list[float], list[float], int]


def _curve(r: RunRow, name: str) -> dict[int, float]:
    c = r.metrics.get(name) or {}
    return dict(zip(c.get("iters") or [], c.get("values") or []))


def _seed_band(c: Configuration, name: str = "val_loss") -> Band:
    """(iterations, mean, min, max, seeds) over the finished seeds' `name` series, at
    the iterations every one of them recorded (so each point has the same seeds);
    empty below two curves."""
    curves = [k for r in c.done.values() if (k := _curve(r, name))]
    if len(c.runs) < 2 or len(curves) < 2:
        return [], [], [], [], 0
    iters = sorted(set.intersection(*(set(k) for k in curves)))
    points = [[k[i] for k in curves] for i in iters]
    return (
        iters,
        [sum(p) / len(p) for p in points],
        [min(p) for p in points],
        [max(p) for p in points],
        len(curves),
    )


@dataclass
class Series:
    label: str
    iters: list[int]
    values: list[float]
    band: tuple[list[float], list[float]] | None = None  # (min, max) over seeds


def _series(rows: list[RunRow], name: str) -> list[Series]:
    """Each configuration's mean over its seeds with their band, else each run's own."""
    configs = configurations(rows)
    names = labels.names(configs)
    out = []
    for c in configs:
        iters, mean, low, high, n = _seed_band(c, name)
        if iters:
            out.append(Series(f"{names[c.key]} (mean of {n} seeds)", iters, mean, (low, high)))
            continue
        # Of several seeds, the finished ones only, as the seed table counts them; a
        # configuration's one run is drawn whatever became of it, its state named.
        seeded = len(c.runs) > 1
        for r in c.runs.values():
            if seeded and r.status not in FINISHED:
                continue
            if curve := _curve(r, name):
                seed = f" (seed {r.seed})" if seeded and r.seed is not None else ""
                state = f" ({r.status})" if r.status not in FINISHED else ""
                out.append(Series(names[c.key] + seed + state, list(curve), list(curve.values())))
    return out


def _draw(ax: Axes, i: int, iters: list[int], values: list[float], label: str):
    look = style.series(i)
    (line,) = ax.plot(
        iters,
        values,
        color=look["color"],
        linestyle=look["linestyle"],
        marker=look["marker"] if len(iters) <= FEW else None,
        markersize=4,
        label=label,
    )
    return line


def _iteration_axis(ax: Axes, last: int) -> None:
    """From step 0 to just past the last point."""
    ax.set_xlim(0, max(last, 1) * 1.03)


def _points(ax: Axes, series: list[Series], xlabel: str) -> str:
    """One evaluation per series: a marker per configuration on its own row
    (error bar: min to max over seeds), instead of dots stacked at one step."""
    for i, s in enumerate(series):
        look = style.series(i)
        err = [[s.values[0] - s.band[0][0]], [s.band[1][0] - s.values[0]]] if s.band else None
        ax.errorbar(
            s.values,
            [i],
            xerr=err,
            marker=look["marker"],
            color=look["color"],
            markersize=7,
            capsize=4 if err else 0,
            linestyle="none",
        )
    ax.set_yticks(range(len(series)), [style.wrap(s.label) for s in series])
    ax.set_ylim(len(series) - 0.5, -0.5)
    ax.grid(axis="y", visible=False)
    ax.set_xlabel(xlabel, fontsize=10)
    steps = sorted({s.iters[0] for s in series})
    return (
        f"iteration {steps[0]}, the only evaluation"
        if len(steps) == 1
        else "each run's only evaluation"
    )


def loss_curves(rows: list[RunRow], name: str, ylabel: str, title: str) -> Figure | None:
    """One figure of the `name` series ("train_loss", "val_loss") of every
    configuration: lines against the iteration, or, where every series has one
    point, a point per configuration."""
    series = _series(rows, name)
    if not series:
        return None
    banded = any(s.band for s in series)
    if all(len(s.iters) == 1 for s in series):
        fig, ax = style.new_figure(0.35 * len(series) + 1.4)
        when = _points(ax, series, ylabel)
        ax.set_title(
            f"{title} at {when}" + (" (bars: min to max over seeds)" if banded else ""), fontsize=11
        )
        return fig
    fig, ax = style.new_figure()
    for i, s in enumerate(series):
        line = _draw(ax, i, s.iters, s.values, s.label)
        if s.band:
            ax.fill_between(s.iters, *s.band, color=line.get_color(), alpha=0.2, linewidth=0)
    _iteration_axis(ax, max(max(s.iters) for s in series))
    style.label_axes(
        ax, "iteration", ylabel, title + (" (band: min to max over seeds)" if banded else "")
    )
    style.legend_outside(ax)
    return fig


def _shared(members: list[str], schedule: str | None, alone: bool) -> str:
    """The legend entry of one schedule: the configurations that share it
    (`alone`: every configuration does)."""
    shown = ", ".join(members[:4]) + (f" and {len(members) - 4} more" if len(members) > 4 else "")
    text = (
        shown
        if len(members) == 1
        else f"all {len(members)} configurations"
        if alone
        else f"{len(members)} configurations: {shown}"
    )
    return f"{text} ({schedule})" if schedule else text


def lr_curves(rows: list[RunRow]) -> Figure | None:
    """The logged LR against the step, one line per distinct schedule, its legend
    entry listing every configuration that followed it (seeds share theirs)."""
    configs = configurations(rows)
    names = labels.names(configs)
    groups: dict[tuple, list[str]] = {}
    kinds: dict[tuple, str | None] = {}
    for c in configs:
        for r in c.runs.values():
            curve = r.metrics.get("lr") or {}
            if curve.get("iters"):
                key = (tuple(curve["iters"]), tuple(curve["values"]))
                groups.setdefault(key, []).append(names[c.key])
                schedule = r.metrics.get("lr_schedule")
                kinds.setdefault(key, schedule.get("name") if isinstance(schedule, dict) else None)
                break
    if not groups:
        return None
    fig, ax = style.new_figure(3.5)
    for i, ((iters, values), members) in enumerate(groups.items()):
        _draw(
            ax,
            i,
            list(iters),
            list(values),
            _shared(members, kinds[(iters, values)], len(groups) == 1),
        )
    _iteration_axis(ax, max(max(iters) for iters, _ in groups))
    style.label_axes(ax, "iteration", "learning rate", "Learning-rate schedule")
    ax.ticklabel_format(axis="y", style="sci", scilimits=(-3, 3))
    style.legend_outside(ax)
    return fig
