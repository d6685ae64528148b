"""How every results figure looks: text of at least MIN_PT points at the saved
size, legends outside the data, and a colour, line style and marker per series
that stay distinct past ten series (colours alone repeat after ten)."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only; no display needed
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

MIN_PT = 9  # the smallest text on a figure, at the size it is saved
STYLE: dict[str, Any] = {
    "font.size": 10,
    "axes.titlesize": 11,
    "axes.labelsize": 10,
    "xtick.labelsize": MIN_PT,
    "ytick.labelsize": MIN_PT,
    "legend.fontsize": MIN_PT,
    "legend.title_fontsize": MIN_PT,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "lines.linewidth": 1.5,
}
DPI = 200  # 6.4 in wide: 1280 px
WIDTH = 6.4  # inches; the legend beside the axes adds to it
COLOURS = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
)  # matplotlib's tab10
LINESTYLES = ("-", "--", "-.", ":")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "h")
RIGHT_MAX = 12  # legends with more entries go below the axes, in columns
LABEL_WIDTH = 48  # characters per legend line


def new_figure(height: float = 4.0) -> tuple[Figure, Axes]:
    with plt.rc_context(STYLE):  # type: ignore[arg-type]  # keys are checked at run time
        fig, ax = plt.subplots(figsize=(WIDTH, height))
    ax.tick_params(labelsize=MIN_PT)  # ticks are made when drawn, after the rc context
    ax.grid(alpha=0.3)
    return fig, ax


def new_panels(count: int, height: float = 3.6) -> tuple[Figure, list[Axes]]:
    """`count` panels side by side sharing the y axis, each as wide as new_figure's
    axes allow (at most three in a row, then more rows)."""
    columns = min(count, 3)
    rows = -(-count // columns)
    with plt.rc_context(STYLE):  # type: ignore[arg-type]
        fig, grid = plt.subplots(
            rows,
            columns,
            figsize=(WIDTH * columns / 1.6, height * rows),
            sharey=True,
            squeeze=False,
        )
    axes = [ax for row in grid for ax in row]
    for ax in axes[count:]:
        ax.set_visible(False)
    for ax in axes[:count]:
        ax.tick_params(labelsize=MIN_PT)
        ax.grid(alpha=0.3)
    return fig, axes[:count]


def series(i: int) -> dict[str, Any]:
    """Colour, line style and marker of the i-th series."""
    return {
        "color": COLOURS[i % len(COLOURS)],
        "linestyle": LINESTYLES[(i // len(COLOURS)) % len(LINESTYLES)],
        "marker": MARKERS[i % len(MARKERS)],
    }


def wrap(label: str) -> str:
    """A label on lines of LABEL_WIDTH, broken at blanks only: a run id or a
    name with hyphens stays whole on its line, however long."""
    return textwrap.fill(
        label,
        LABEL_WIDTH,
        subsequent_indent="  ",
        break_long_words=False,
        break_on_hyphens=False,
    )


def legend_outside(ax: Axes, handles_from: Axes | None = None) -> None:
    """The legend right of the axes, or below them in columns when long
    (handles_from: the axes whose series it names, when that is another panel)."""
    handles, labels = (handles_from or ax).get_legend_handles_labels()
    if not handles:
        return
    labels = [wrap(lb) for lb in labels]
    if len(handles) <= RIGHT_MAX:
        ax.legend(
            handles,
            labels,
            loc="upper left",
            bbox_to_anchor=(1.02, 1.0),
            borderaxespad=0.0,
            frameon=False,
            fontsize=MIN_PT,
        )
    else:
        ax.legend(
            handles,
            labels,
            loc="upper center",
            bbox_to_anchor=(0.5, -0.16),
            ncol=2,
            frameon=False,
            fontsize=MIN_PT,
        )


def label_axes(ax: Axes, xlabel: str, ylabel: str, title: str) -> None:
    ax.set_xlabel(xlabel, fontsize=10)
    ax.set_ylabel(ylabel, fontsize=10)
    ax.set_title(title, fontsize=11)


def discard(fig: Figure) -> None:
    plt.close(fig)


def save(fig: Figure, path: Path) -> Path:
    """The figure as a PNG, cropped to what it draws (legend included)."""
    fig.savefig(path, dpi=DPI, bbox_inches="tight", pad_inches=0.1)
    plt.close(fig)
    return path
