"""The figures of `make results` inspected as matplotlib figures: what each one
draws (lines, bands, markers, points per configuration), where its legend is,
how large its text is, and how configurations are named."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib.pyplot as plt
import pytest
from matplotlib.collections import PolyCollection
from matplotlib.figure import Figure
from matplotlib.text import Text

from lib.results import labels, plots, style
from lib.results.collect import read_run
from lib.results.seeds import configurations
from tests.lib.results.conftest import make_run

LR = {"iters": [0, 10, 20, 30], "values": [1e-4, 1e-3, 5e-4, 1e-4]}


def _rows(root: Path):
    return [read_run(p) for p in sorted(root.iterdir())]


def _train(seed: int, scale: float = 1.0) -> dict:
    return {"iters": [0, 10, 20, 30], "values": [scale * (8 - i + 0.1 * seed) for i in range(4)]}


def _run(
    root: Path,
    name: str,
    best: float,
    *,
    seed: int | None = None,
    scale: float = 1.0,
    lr: dict = LR,
    **kw,
) -> Path:
    """A run with a training curve, an LR series and one evaluation, at iteration 30."""
    return make_run(
        root,
        name,
        best,
        seed=seed,
        train_loss=_train(seed or 1, scale),
        lr=lr,
        val_loss={"iters": [30], "values": [math.log(best)]},
        **kw,
    )


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    """Dense AdamW with seeds 1-3; magnitude 50 % with AdamW and AdamW-SPAM (seeds 1-3
    each), magnitude 90 % with AdamW (one seed): one evaluation each, one LR schedule
    but the last run's. Built once: no test writes to it."""
    root = tmp_path_factory.mktemp("plots") / "runs"
    for seed in (1, 2, 3):
        _run(root, f"gpt2_adamw_none_s{seed}", 100.0 + seed, seed=seed)
        _run(
            root,
            f"gpt2_adamw_magnitude_50_s{seed}",
            110.0 + 2 * seed,
            seed=seed,
            scale=1.1,
            method="magnitude",
        )
        _run(
            root,
            f"gpt2_adamwspam_magnitude_50_s{seed}",
            111.0 + 3 * seed,
            seed=seed,
            scale=1.2,
            optimizer="adamwspam",
            method="magnitude",
        )
    _run(
        root,
        "gpt2_adamw_magnitude_90",
        150.0,
        scale=1.3,
        method="magnitude",
        sparsity="0.9",
        lr={"iters": [0, 30], "values": [1e-3, 1e-3]},
    )
    return root


@pytest.fixture(scope="module")
def figures(runs):
    """The figures, drawn once for the module: the tests read them (and draw them to
    measure text and legends), none changes what they show."""
    rows = _rows(runs)
    base = next(r for r in rows if r.run_id == "gpt2_adamw_none_s1")
    made = plots.figures(rows, {"gpt2": base})
    yield made
    for fig in made.values():
        plt.close(fig)


def _texts(fig: Figure) -> list[Text]:
    fig.canvas.draw()
    return [t for t in fig.findobj(Text) if t.get_text().strip() and t.get_visible()]


def _legend_outside(fig: Figure) -> None:
    fig.canvas.draw()
    (ax,) = fig.axes
    legend = ax.get_legend()
    box, data = legend.get_window_extent(), ax.get_window_extent()
    assert box.x0 >= data.x1 or box.y1 <= data.y0, (box, data)  # right of or below the axes


def test_every_figure_is_drawn_with_readable_text(figures):
    assert set(figures) == {
        "train_loss.png",
        "val_loss.png",
        "lr.png",
        "ppl_vs_sparsity.png",
        "memory.png",
        "throughput.png",
    }
    for name, fig in figures.items():
        sizes = {t.get_text(): t.get_fontsize() for t in _texts(fig)}
        assert sizes and min(sizes.values()) >= style.MIN_PT, (name, sizes)
        # no raw run id anywhere: configurations by name
        assert not any("gpt2_" in text for text in sizes), (name, list(sizes))


def test_training_loss_is_a_mean_line_and_band_per_seeded_configuration(figures):
    fig = figures["train_loss.png"]
    (ax,) = fig.axes
    lines = {line.get_label(): line for line in ax.get_lines()}
    assert list(lines) == [
        "AdamW magnitude 50 % (mean of 3 seeds)",
        "AdamW magnitude 90 %",
        "AdamW dense (mean of 3 seeds)",
        "AdamW-SPAM magnitude 50 % (mean of 3 seeds)",
    ]  # folder order
    dense = lines["AdamW dense (mean of 3 seeds)"]
    # seeds 1-3 at 0.1 * seed apart: mean 8 - i + 0.2
    assert list(dense.get_xdata()) == [0, 10, 20, 30]
    assert list(dense.get_ydata()) == pytest.approx([8.2, 7.2, 6.2, 5.2])
    assert all(line.get_marker() not in (None, "None", "") for line in lines.values())  # 4 points
    bands = [c for c in ax.collections if isinstance(c, PolyCollection)]
    assert len(bands) == 3  # the three seeded configurations
    edge = bands[1].get_paths()[0].vertices[:, 1]  # dense: seeds 0.1 apart around 8 - i
    assert (edge.min(), edge.max()) == pytest.approx((8 - 3 + 0.1, 8 + 0.3))
    assert len({line.get_color() for line in lines.values()}) == 4
    _legend_outside(fig)


def test_one_evaluation_per_run_is_a_marker_per_configuration(figures):
    (ax,) = figures["val_loss.png"].axes
    assert "iteration 30, the only evaluation" in ax.get_title()
    points = [c.lines[0] for c in ax.containers]  # each errorbar's marker line
    assert len(points) == 4 and all(line.get_markersize() >= 6 for line in points)
    assert all(line.get_marker() not in (None, "None", "") for line in points)
    assert [line.get_ydata()[0] for line in points] == [0, 1, 2, 3]  # one row each
    assert points[2].get_xdata()[0] == pytest.approx(sum(math.log(100 + s) for s in (1, 2, 3)) / 3)
    assert [t.get_text() for t in ax.get_yticklabels()] == [
        "AdamW magnitude 50 % (mean of 3 seeds)",
        "AdamW magnitude 90 %",
        "AdamW dense (mean of 3 seeds)",
        "AdamW-SPAM magnitude 50 % (mean of 3 seeds)",
    ]


def test_identical_schedules_are_one_line_listing_every_configuration(figures):
    (ax,) = figures["lr.png"].axes
    lines = ax.get_lines()
    assert len(lines) == 2  # the shared schedule and the constant one of magnitude 90 %
    assert lines[0].get_label() == (
        "3 configurations: AdamW magnitude 50 %, AdamW dense, AdamW-SPAM magnitude 50 %"
    )
    assert lines[1].get_label() == "AdamW magnitude 90 %"
    assert lines[0].get_linestyle() != lines[1].get_linestyle() or (
        lines[0].get_color() != lines[1].get_color()
    )
    _legend_outside(figures["lr.png"])


def test_points_at_one_sparsity_are_dodged_and_their_error_bars_apart(figures):
    fig = figures["ppl_vs_sparsity.png"]
    fig.canvas.draw()
    (ax,) = fig.axes
    series = {c.get_label(): c.lines[0] for c in ax.containers}  # errorbar: label, data line
    adamw, spam = series["AdamW magnitude"], series["AdamW-SPAM magnitude"]
    assert list(adamw.get_ydata()) == pytest.approx([114.0, 150.0])  # mean of 112, 114, 116
    assert list(spam.get_ydata()) == pytest.approx([117.0])  # 114, 117, 120
    x_adamw, x_spam = adamw.get_xdata()[0], spam.get_xdata()[0]
    assert x_adamw < 50 < x_spam and x_spam - 50 == pytest.approx(50 - x_adamw)
    # the caps (CAPSIZE points each side) of the two bars at 50 % do not touch
    to_px = ax.transData.transform
    gap = to_px((x_spam, 0))[0] - to_px((x_adamw, 0))[0]
    assert gap > 2 * plots.CAPSIZE * fig.dpi / 72
    assert [t.get_text() for t in ax.get_xticklabels()] == ["50", "90"]
    _legend_outside(fig)


def test_bar_charts_name_configurations_and_show_seed_spread(figures):
    (ax,) = figures["throughput.png"].axes
    names = [t.get_text() for t in ax.get_yticklabels()]
    assert names == [
        "AdamW magnitude 50 %",
        "AdamW magnitude 90 %",
        "AdamW dense",
        "AdamW-SPAM magnitude 50 %",
    ]
    assert all(t.get_fontsize() >= style.MIN_PT for t in ax.get_yticklabels())
    assert [p.get_width() for p in ax.patches] == pytest.approx([1000.0] * 4)


def test_names_tell_apart_configurations_that_differ_in_an_override(tmp_path):
    root = tmp_path / "runs"
    rows = [read_run(make_run(root, name, 100.0)) for name in ("lr_a", "lr_b", "plain")]
    rows[0].overrides, rows[1].overrides = {"LEARNING_RATE": "1e-3"}, {"LEARNING_RATE": "3e-3"}
    got = labels.names(configurations(rows))
    assert got == {
        "lr_a": "AdamW dense (LEARNING_RATE=1e-3)",
        "lr_b": "AdamW dense (LEARNING_RATE=3e-3)",
        "plain": "AdamW dense",
    }
