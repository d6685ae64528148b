"""`make report`: one self-contained index.html for a run, a matrix or a folder of runs.

The page holds the summary tables (the columns of lib/results/tables.py, the
seed table of lib/results/seeds.py where configurations have several seeds,
and a tuned matrix's tuning table, lib/results/tuning.py), every plot
(lib/results/plots.py, embedded as base64 data URIs), the runs' software and
hardware (lib/results/environment.py), each run's configuration against its
model's baseline run (lib/results/config_diff.py) and relative links to each
run's logs. It fits a 1280 px screen (lib/results/page.py's stylesheet): long
ids and errors wrap, and columns past the core ones go to further tables
rather than off the edge. It needs nothing beside it but the run folders those
links point to. The page is built whole in memory and moved into place
(lib/results/outputs.py), so a failure leaves the previous index.html as it was.
"""

from __future__ import annotations

import base64
import html
import math
import tempfile
import time
from pathlib import Path
from typing import Any

from lib.plural import counted
from lib.results import (
    comparison,
    environment,
    labels,
    page,
    plots,
    seeds,
    style,
    tables,
)
from lib.results.collect import RunRow, load_rows
from lib.results.config_diff import config_section
from lib.results.outputs import Staging
from lib.results.tuning import (
    EDGE_NOTE,
    Tuning,
    load,
    stale_runs,
    table_cells,
    table_header,
    table_intro,
)

FILE = "index.html"
LOGS = ("output.log", "console.log", "metrics.json")
PLOTS = {
    "train_loss.png": "Training loss of every configuration (several seeds: mean, min-max band)",
    "val_loss.png": "Validation loss of every configuration (several seeds: mean, min-max band)",
    "lr.png": "Learning rate against the step; configurations that share a schedule share a line",
    "ppl_vs_sparsity.png": "Best perplexity against sparsity (baselines dashed; "
    "several seeds: mean ± sd)",
    "memory.png": "Peak memory per configuration",
    "throughput.png": "Training tokens/s per configuration",
    "tuning_curve.png": "Tuning: each trial's validation loss against its tuned value, a "
    "panel per tuned symbol (x: a pruned trial at its last reported loss; ringed: the "
    "configuration's best trial)",
}
CORE = (
    "run",
    "seed",
    "optimizer",
    "pruning",
    "sparsity",
    "variant",
    "best ppl",
    "final ppl",
    "best nats/char",  # the key figure across tokenizers, where runs recorded it
    "delta %",
    "tokens/s",
    "peak GiB",
    "mem x weights",
    "wall min",
    "status",
)
PER_TABLE = 10  # measurement columns (monitor, inference, eval sets) per further table


def _logs(root: Path, r: RunRow) -> str:
    """One link per log, one per line (the column stays narrow)."""
    links = [
        f'<a href="{page.href(root, r.path / name)}">{name}</a>'
        if (r.path / name).is_file()
        else f'<span class="missing">no {name}</span>'
        for name in LOGS
    ]
    return " ".join(links)


def _cells(root: Path, r: RunRow, cols: list[tables.Column], logs: bool) -> list[tuple[str, str]]:
    cells = [
        (
            html.escape(tables.format_value(f(r), spec)),
            "num" if spec else "status" if h == "status" else "",
        )
        for h, f, spec in cols
    ]
    cells[0] = (f'<a href="#{page.anchor(r.run_id)}">{html.escape(r.run_id)}</a>', "run")
    return cells + [(_logs(root, r), "logs")] if logs else cells


def seeds_section(rows: list[RunRow], baselines: dict[str, RunRow]) -> str:
    """The seed table of each model (the cells of summary.md's), or the line
    saying each configuration has one seed."""
    groups = seeds.summarize_seeds(rows, baselines)
    if not seeds.seeded(groups):
        return f"<p>{html.escape(seeds.ONE_SEED)}</p>"
    parts = ["<h2>Seed statistics</h2>", f"<p>{html.escape(tables.SEED_INTRO)}</p>"]
    for g in groups:
        base = tables.baseline_prose(g)
        parts.append(
            f"<h3>{html.escape(g.model)}</h3><p>Baseline configuration: {html.escape(base)}</p>"
        )
        head = seeds.header(g)
        kinds = ["run", ""] + ["num"] * (len(head) - 3) + ["paired"]  # long ones may wrap
        body = [[(html.escape(c), k) for c, k in zip(seeds.cells(g, r), kinds)] for r in g.rows]
        for cls, columns in _seed_columns(len(g.figures)):
            table = page.table(
                [head[i] for i in columns], [[r[i] for i in columns] for r in body], cls
            )
            parts.append(f'<div class="wide">{table}</div>')
    return "\n".join(parts)


SEED_FIGURES = 8  # figures in one seed table; past that, eval and lm-eval ones move on


def _seed_columns(figures: int) -> list[tuple[str, list[int]]]:
    """(table class, column indices of seeds.header) of each seed table: one table
    up to SEED_FIGURES figures, else the training figures with the paired
    comparison, then the others six at a time, each led by the configuration."""
    last = 3 + figures  # the paired comparison's column
    if figures <= SEED_FIGURES:
        return [("seeds", list(range(last + 1)))]
    first = len(seeds.TRAINING_FIGURES)
    rest = list(range(3 + first, last))
    return [("seeds", [0, 1, 2, *range(3, 3 + first), last])] + [
        ("seeds-more", [0, *rest[i : i + 6]]) for i in range(0, len(rest), 6)
    ]


def summary_section(root: Path, rows: list[RunRow], baselines: dict[str, RunRow]) -> str:
    """Per model, the runs table of summary.md with links to the logs; columns
    past its core ones (run monitor, inference, eval sets, lm-eval scores) go to
    further tables of PER_TABLE columns each, so the page fits a 1280 px screen."""
    parts = [
        seeds_section(rows, baselines),
        "<h2>Summary</h2>",
        "<p>Delta % is the best validation perplexity relative to the model's baseline (a "
        "seeded run: to its seed's baseline run); sparsity is the final measured share of "
        "zeros among the prunable weights, the blocks' matrices (embeddings are never "
        "pruned; the target where a run has none).</p>",
    ]
    for model, group in tables.by_model(rows).items():
        cols = tables.columns(group)
        base = baselines.get(model)
        parts.append(
            f"<h3>{html.escape(model)}</h3><p>Baseline: "
            f"{html.escape(base.run_id + tables.tuned_note(base)) if base else 'none (no dense AdamW run)'}</p>"
        )
        core = [c for c in cols if c[0] in CORE]
        table = page.table(
            [h for h, _, _ in core] + ["logs"],
            [_cells(root, r, core, True) for r in group],
            "summary",
        )
        parts.append(f'<div class="wide">{table}</div>')
        more = [c for c in cols if c[0] not in CORE]
        for i in range(0, len(more), PER_TABLE):
            chosen = [cols[0], *more[i : i + PER_TABLE]]
            table = page.table(
                [h for h, _, _ in chosen],
                [_cells(root, r, chosen, False) for r in group],
                "measurements",
            )
            parts.append(f'<div class="wide">{table}</div>')
    return "\n".join(parts)


def tuning_section(tuning: Tuning | None, rows: list[RunRow]) -> str:
    """A tuned matrix's tuning table (lib/results/tuning.py), its budget
    stated once above it and its problems below; "" for an untuned folder."""
    if tuning is None or not (tuning or tuning.problems):
        return ""
    parts = ["<h2>Tuning</h2>"]
    if tuning:
        names = labels.names(seeds.configurations(rows))
        parts.append(f"<p>{html.escape(table_intro(tuning))}</p>")
        kinds = ["run", "", ""] + ["num"] * (len(table_header(tuning)) - 5) + ["", ""]
        body = [
            [
                (html.escape(c), k)
                for c, k in zip(table_cells(tuning, s, names.get(s.config, s.config)), kinds)
            ]
            for s in tuning.studies
        ]
        table = page.table(table_header(tuning), body, "tuning")
        parts += [
            f'<div class="wide">{table}</div>',
            f"<p>{html.escape(EDGE_NOTE)}</p>",
        ]
    problems = tuning.problems + stale_runs(tuning, rows)
    if problems:
        parts.append(
            "<ul>" + "".join(f"<li>warning: {html.escape(p)}</li>" for p in problems) + "</ul>"
        )
    return "\n".join(parts)


# The smallest plot text on the page, in CSS pixels: an image is never shown narrower
# than this allows (the page scrolls sideways instead).
MIN_TEXT_PX = 10


def shown_width(png: bytes) -> int:
    """The narrowest width a PNG may be shown at so that its smallest text
    (style.MIN_PT at style.DPI) stays at MIN_TEXT_PX or more."""
    width = int.from_bytes(png[16:20], "big")  # the IHDR chunk's width
    natural = style.MIN_PT * style.DPI / 72  # the smallest text's height in image pixels
    return math.ceil(width * MIN_TEXT_PX / natural)


def caption_of(name: str, rows: list[RunRow]) -> str:
    """A figure's caption, saying "mean" and "band" only where configurations have
    several seeds, and how CPU measurements were taken where runs ran on a CPU."""
    seeded = any(len(c.runs) > 1 for c in seeds.configurations(rows))
    cpu = any(r.metrics.get("device") == "cpu" for r in rows)
    band = " (several seeds: mean, min-max band)" if seeded else ""
    captions = {
        "train_loss.png": f"Training loss of every configuration{band}",
        "val_loss.png": f"Validation loss of every configuration{band}",
        "ppl_vs_sparsity.png": "Best perplexity against sparsity (baselines dashed"
        + ("; several seeds: mean ± sd" if seeded else "")
        + "; methods at one sparsity are set side by side, not at their exact sparsity)",
        "memory.png": "Peak memory per configuration"
        + (" (a CPU run's is its process's peak RSS)" if cpu else ""),
        "throughput.png": "Training tokens/s per configuration"
        + (
            " (CPU runs: measured on a shared CPU, so they move with its load; "
            "the load average at each run's end is in its metrics.json)"
            if cpu
            else ""
        ),
    }
    return captions.get(name) or PLOTS.get(name, name)


def plots_section(
    rows: list[RunRow], baselines: dict[str, RunRow], tuning: Tuning | None = None
) -> str:
    """Every plot plots.write_all makes, drawn afresh and embedded as a data URI."""
    figures = []
    with tempfile.TemporaryDirectory() as tmp:
        for path in plots.write_all(rows, baselines, Path(tmp), tuning):
            png = path.read_bytes()
            data = base64.b64encode(png).decode("ascii")
            caption = html.escape(caption_of(path.name, rows))
            # The figure, not the image, holds the width that keeps its text at
            # 10 px: it takes a row of its own when it needs one, never more than the page.
            figures.append(
                f'<figure style="min-width: min({shown_width(png)}px, 100%)">'
                f'<img src="data:image/png;base64,{data}" alt="{caption}">'
                f"<figcaption>{caption}</figcaption></figure>"
            )
    body = "\n".join(figures) or "<p>No plots: no run has recorded metrics yet.</p>"
    return "<h2>Plots</h2>\n" + body


def environment_section(rows: list[RunRow]) -> str:
    """The software and hardware of the runs (lib/results/environment.py): once
    when every run recorded the same, else each differing value with its runs."""
    envs = environment.gather(rows)
    if not envs.recorded:
        return ""
    parts = ["<h2>Software and hardware</h2>"]
    if envs.identical:
        parts.append(f"<p>The same for all {counted(len(envs.recorded), 'run')}.</p>")
        body = [
            [(html.escape(s.name), ""), (html.escape(next(iter(s.values))), "")]
            for s in envs.settings
        ]
        parts.append(page.table(["setting", "value"], body, "environment"))
    else:
        body = [
            [
                (html.escape(s.name), ""),
                (
                    "<br>".join(
                        html.escape(
                            v
                            if len(s.values) == 1 and len(ids) == len(envs.recorded)
                            else f"{v} ({', '.join(ids)})"
                        )
                        for v, ids in s.values.items()
                    ),
                    "",
                ),
            ]
            for s in envs.settings
        ]
        parts.append("<p>Values that not every run shares name their runs.</p>")
        parts.append(page.table(["setting", "value"], body, "environment"))
    if envs.missing:
        parts.append(
            f'<p class="missing">No environment recorded (runs from before it was '
            f"recorded): {html.escape(', '.join(envs.missing))}</p>"
        )
    return "\n".join(parts)


def render(
    root: Path,
    rows: list[RunRow],
    matrix: dict[str, Any],
    baselines: dict[str, RunRow],
    tuning: Tuning | None = None,
) -> str:
    title = f"Results: {matrix.get('matrix_id', root.name)}"
    counts: dict[str, int] = {}
    for r in rows:
        counts[r.status] = counts.get(r.status, 0) + 1
    state = ", ".join(f"{n} {s}" for s, n in counts.items())
    intro = (
        f"<p>{counted(len(rows), 'run')}: {html.escape(state)}. Written "
        f"{time.strftime('%Y-%m-%d %H:%M')} by <code>make report</code> from "
        f"<code>{html.escape(str(root))}</code>.</p>"
    )
    if matrix.get("overrides"):
        shown = " ".join(f"{k}={v}" for k, v in matrix["overrides"].items())
        intro += f"<p>Overrides on every run: <code>{html.escape(shown)}</code></p>"
    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en"><head><meta charset="utf-8">',
            f"<title>{html.escape(title)}</title><style>{page.STYLE}</style></head><body>",
            f"<h1>{html.escape(title)}</h1>",
            intro,
            *filter(None, [tuning_section(tuning, rows)]),  # no line at all when untuned
            *filter(None, [comparison.html_section(rows)]),  # runs and baselines on bits/byte
            summary_section(root, rows, baselines),
            plots_section(rows, baselines, tuning),
            environment_section(rows),
            config_section(root, rows, baselines),
            "</body></html>",
            "",
        ]
    )


def build_report(
    root: Path, baseline: str | None = None, tuning: Tuning | None = None
) -> tuple[Path, list[RunRow]]:
    """index.html in root (a matrix, or any folder of run folders), written only
    once the whole page is built; returns its path and the rows it shows.
    tuning: a tuned matrix's studies (read from root/tune/ when not given)."""
    root = Path(root)
    rows, matrix, baselines = load_rows(root, baseline)
    page = render(root, rows, matrix, baselines, load(root) if tuning is None else tuning)
    with Staging(root) as stage:
        return stage.commit([stage.text(FILE, page)])[0], rows
