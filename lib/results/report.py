"""`make report`: one self-contained index.html for a run, a matrix or a folder of runs.

The page holds the summary tables (the columns of lib/results/tables.py, and
the seed table of lib/results/seeds.py where configurations have several
seeds), every plot (lib/results/plots.py, embedded as base64 data URIs), the
runs' software and hardware (lib/results/environment.py), each run's
configuration against its model's baseline run (typed values from the two
config.txt files) and relative links to each run's logs. It fits a 1280 px
screen: long ids and errors wrap, and columns past the core ones go to
further tables rather than off the edge. It needs nothing
beside it but the run folders those links point to. The page is built whole in
memory and moved into place (lib/results/outputs.py), so a failure leaves the
previous index.html as it was.
"""
from __future__ import annotations

import base64
import html
import tempfile
import time
from pathlib import Path
from typing import Any, Iterable
from urllib.parse import quote

from lib.config.run_config import load_run_config
from lib.config.kconfig import ConfigError, open_tree
from lib.results import environment, plots, seeds, tables
from lib.results.collect import RunRow, load_rows
from lib.results.outputs import Staging
from lib.plural import counted

FILE = "index.html"
LOGS = ("output.log", "console.log", "metrics.json")
PLOTS = {"train_loss.png": "Training loss of every configuration (several seeds: mean, "
                           "min-max band)",
         "val_loss.png": "Validation loss of every configuration (several seeds: mean, "
                         "min-max band)",
         "lr.png": "Learning rate against the step; configurations that share a schedule share "
                   "a line",
         "ppl_vs_sparsity.png": "Best perplexity against sparsity (baselines dashed; "
                                "several seeds: mean ± sd)",
         "memory.png": "Peak memory per configuration",
         "throughput.png": "Training tokens/s per configuration"}
CORE = ("run", "seed", "optimizer", "pruning", "sparsity", "variant", "best ppl", "final ppl",
        "delta %", "tokens/s", "peak GiB", "mem x weights", "wall min", "status")
PER_TABLE = 10  # measurement columns (monitor, inference, eval sets) per further table
STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #222; }
.wide { overflow-x: auto; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 12px; }
th, td { border: 1px solid #ccc; padding: 3px 6px; text-align: left; vertical-align: top; }
th { background: #f0f0f0; }
td { overflow-wrap: break-word; }
td.run, td.status { overflow-wrap: anywhere; }  /* long ids and errors wrap, not the page */
td.run { min-width: 8em; max-width: 16em; }
td.status { min-width: 10em; max-width: 24em; }
table.config-diff td, table.environment td { overflow-wrap: anywhere; max-width: 60em; }
td.logs a, td.logs span { display: block; white-space: nowrap; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.paired { text-align: right; font-variant-numeric: tabular-nums; min-width: 12em; }
tr:nth-child(even) td { background: #fafafa; }
.missing { color: #999; }
figure { display: inline-block; box-sizing: border-box; width: 49%; min-width: 400px;
         margin: 0 0 1em 0; padding-right: 1em; vertical-align: top; }
img { max-width: 100%; border: 1px solid #ddd; }
code { background: #f4f4f4; padding: 0 3px; overflow-wrap: anywhere; }
"""
_UNSET = object()
Diff = list[tuple[str, Any, Any]]


def config_values(run_dir: Path) -> dict[str, Any] | str:
    """A run's typed configuration from its config.txt, or why it cannot be read."""
    try:
        return load_run_config([], run_dir / "config.txt").values
    except (ConfigError, OSError) as err:
        return f"config.txt unreadable: {str(err).splitlines()[0]}"


def settable(kconf: Any) -> set[str]:
    """Names a diff shows: named choices and prompted symbols, less the members of
    named choices (the choice's own row says which one is on). Hidden helpers
    (OPTIM_USES_*) follow from these and are left out."""
    members = {s.name for c in kconf.named_choices.values() for s in c.syms}
    prompted = {s.name for s in kconf.unique_defined_syms if any(n.prompt for n in s.nodes)}
    return (prompted - members) | set(kconf.named_choices)


def config_diff(base: dict[str, Any], run: dict[str, Any], shown: set[str] | None = None,
                first: Iterable[str] = ()) -> Diff:
    """(symbol, baseline value, run value) for each symbol in `shown` (all when None)
    whose typed value differs, the symbols in `first` (the run's overrides)
    leading; _UNSET where a side has no value."""
    names = list(run) + [n for n in base if n not in run]
    changed = [n for n in names if base.get(n, _UNSET) != run.get(n, _UNSET)
               and (shown is None or n in shown)]
    first = list(first)
    changed.sort(key=lambda n: first.index(n) if n in first else len(first))
    return [(n, base.get(n, _UNSET), run.get(n, _UNSET)) for n in changed]


def _shown(value: Any) -> str:
    if value is _UNSET:
        return "(not set)"
    if isinstance(value, bool):
        return "y" if value else "n"
    return repr(value) if isinstance(value, float) else str(value)


def _table(headers: list[str], rows: list[list[tuple[str, str]]], cls: str) -> str:
    """rows of (cell HTML, css class) under escaped headers."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "\n".join("<tr>" + "".join(f'<td class="{c}">{cell}</td>' if c else f"<td>{cell}</td>"
                                      for cell, c in row) + "</tr>" for row in rows)
    return (f'<table class="{cls}">\n<thead><tr>{head}</tr></thead>\n'
            f"<tbody>\n{body}\n</tbody></table>")


def _href(root: Path, path: Path) -> str:
    try:
        return quote(path.relative_to(root).as_posix())
    except ValueError:
        return path.resolve().as_uri()


def _anchor(run_id: str) -> str:
    return "run-" + quote(run_id, safe="")


def _logs(root: Path, r: RunRow) -> str:
    """One link per log, one per line (the column stays narrow)."""
    links = [f'<a href="{_href(root, r.path / name)}">{name}</a>' if (r.path / name).is_file()
             else f'<span class="missing">no {name}</span>' for name in LOGS]
    return " ".join(links)


def _cells(root: Path, r: RunRow, cols: list[tables.Column], logs: bool) -> list[tuple[str, str]]:
    cells = [(html.escape(tables.format_value(f(r), spec)),
              "num" if spec else "status" if h == "status" else "")
             for h, f, spec in cols]
    cells[0] = (f'<a href="#{_anchor(r.run_id)}">{html.escape(r.run_id)}</a>', "run")
    return cells + [(_logs(root, r), "logs")] if logs else cells


def seeds_section(rows: list[RunRow], baselines: dict[str, RunRow]) -> str:
    """The seed table of each model (the cells of summary.md's), or the line
    saying each configuration has one seed."""
    groups = seeds.summarize_seeds(rows, baselines)
    if not seeds.seeded(groups):
        return f"<p>{html.escape(seeds.ONE_SEED)}</p>"
    parts = ["<h2>Seed statistics</h2>", f"<p>{html.escape(tables.SEED_INTRO)}</p>"]
    for g in groups:
        base = g.baseline.key if g.baseline else "none (no dense AdamW run)"
        parts.append(f"<h3>{html.escape(g.model)}</h3><p>Baseline configuration: "
                     f"{html.escape(base)}</p>")
        head = seeds.header(g)
        kinds = ["run", ""] + ["num"] * (len(head) - 3) + ["paired"]  # long ones may wrap
        body = [[(html.escape(c), k) for c, k in zip(seeds.cells(g, r), kinds)] for r in g.rows]
        for cls, columns in _seed_columns(len(g.figures)):
            table = _table([head[i] for i in columns], [[r[i] for i in columns] for r in body],
                           cls)
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
        ("seeds-more", [0, *rest[i:i + 6]]) for i in range(0, len(rest), 6)]


def summary_section(root: Path, rows: list[RunRow], baselines: dict[str, RunRow]) -> str:
    """Per model, the runs table of summary.md with links to the logs; columns
    past its core ones (run monitor, inference, eval sets, lm-eval scores) go to
    further tables of PER_TABLE columns each, so the page fits a 1280 px screen."""
    parts = [seeds_section(rows, baselines), "<h2>Summary</h2>",
             "<p>Delta % is the best validation perplexity relative to the model's baseline; "
             "sparsity is the final measured value (the target where a run has none).</p>"]
    for model, group in tables.by_model(rows).items():
        cols = tables.columns(group)
        base = baselines.get(model)
        parts.append(f"<h3>{html.escape(model)}</h3><p>Baseline: "
                     f"{html.escape(base.run_id) if base else 'none (no dense AdamW run)'}</p>")
        core = [c for c in cols if c[0] in CORE]
        table = _table([h for h, _, _ in core] + ["logs"],
                       [_cells(root, r, core, True) for r in group], "summary")
        parts.append(f'<div class="wide">{table}</div>')
        more = [c for c in cols if c[0] not in CORE]
        for i in range(0, len(more), PER_TABLE):
            chosen = [cols[0], *more[i:i + PER_TABLE]]
            table = _table([h for h, _, _ in chosen],
                           [_cells(root, r, chosen, False) for r in group], "measurements")
            parts.append(f'<div class="wide">{table}</div>')
    return "\n".join(parts)


def plots_section(rows: list[RunRow], baselines: dict[str, RunRow]) -> str:
    """Every plot plots.write_all makes, drawn afresh and embedded as a data URI."""
    figures = []
    with tempfile.TemporaryDirectory() as tmp:
        for path in plots.write_all(rows, baselines, Path(tmp)):
            data = base64.b64encode(path.read_bytes()).decode("ascii")
            caption = html.escape(PLOTS.get(path.name, path.stem))
            figures.append(f'<figure><img src="data:image/png;base64,{data}" alt="{caption}">'
                           f"<figcaption>{caption}</figcaption></figure>")
    body = "\n".join(figures) or "<p>No plots: no run has recorded metrics yet.</p>"
    return "<h2>Plots</h2>\n" + body


def config_section(root: Path, rows: list[RunRow], baselines: dict[str, RunRow]) -> str:
    """Per run, the symbols whose value differs from its model's baseline run (the
    first run of the model whose config reads, where no baseline was found)."""
    values = {r.run_id: config_values(r.path) for r in rows}
    shown = settable(open_tree())
    parts = ["<h2>Configuration against the baseline</h2>"]
    for model, group in tables.by_model(rows).items():
        readable = [r for r in group if isinstance(values[r.run_id], dict)]
        ref = baselines.get(model) or (readable[0] if readable else None)
        for r in group:
            parts.append(f'<h3 id="{_anchor(r.run_id)}">{html.escape(r.run_id)}</h3>')
            mine, ref_values = values[r.run_id], values[ref.run_id] if ref else None
            if isinstance(mine, str):
                parts.append(f'<p class="missing">{html.escape(mine)}</p>')
            elif ref is None or not isinstance(ref_values, dict):
                parts.append('<p class="missing">no baseline configuration to compare with</p>')
            elif len(rows) == 1:
                parts.append(f'<p>The only run here; its whole configuration is in '
                             f'<a href="{_href(root, r.path / "config.txt")}">config.txt</a>.</p>')
            elif ref.run_id == r.run_id:
                parts.append("<p>The baseline run.</p>")
            else:
                diff = config_diff(ref_values, mine, shown, r.overrides)  # overrides first
                count = ("1 symbol differs" if len(diff) == 1
                         else f"{len(diff) or 'no'} symbols differ")
                parts.append(f"<p>Against <code>{html.escape(ref.run_id)}</code>: {count}.</p>")
                if diff:
                    parts.append(_table(["symbol", "baseline", "this run"], [
                        [(html.escape(n), ""), (html.escape(_shown(b)), ""),
                         (html.escape(_shown(v)), "")] for n, b, v in diff], "config-diff"))
    return "\n".join(parts)


def environment_section(rows: list[RunRow]) -> str:
    """The software and hardware of the runs (lib/results/environment.py): once
    when every run recorded the same, else each differing value with its runs."""
    envs = environment.gather(rows)
    if not envs.recorded:
        return ""
    parts = ["<h2>Software and hardware</h2>"]
    if envs.identical:
        parts.append(f"<p>The same for all {counted(len(envs.recorded), 'run')}.</p>")
        body = [[(html.escape(s.name), ""), (html.escape(next(iter(s.values))), "")]
                for s in envs.settings]
        parts.append(_table(["setting", "value"], body, "environment"))
    else:
        body = [[(html.escape(s.name), ""), ("<br>".join(
            html.escape(v if len(s.values) == 1 and len(ids) == len(envs.recorded)
                        else f"{v} ({', '.join(ids)})") for v, ids in s.values.items()), "")]
            for s in envs.settings]
        parts.append("<p>Values that not every run shares name their runs.</p>")
        parts.append(_table(["setting", "value"], body, "environment"))
    if envs.missing:
        parts.append(f'<p class="missing">No environment recorded (runs from before it was '
                     f'recorded): {html.escape(", ".join(envs.missing))}</p>')
    return "\n".join(parts)


def render(root: Path, rows: list[RunRow], matrix: dict[str, Any],
           baselines: dict[str, RunRow]) -> str:
    title = f"Results: {matrix.get('matrix_id', root.name)}"
    counts: dict[str, int] = {}
    for r in rows:
        counts[r.status] = counts.get(r.status, 0) + 1
    state = ", ".join(f"{n} {s}" for s, n in counts.items())
    intro = (f"<p>{counted(len(rows), 'run')}: {html.escape(state)}. Written "
             f"{time.strftime('%Y-%m-%d %H:%M')} by <code>make report</code> from "
             f"<code>{html.escape(str(root))}</code>.</p>")
    if matrix.get("overrides"):
        shown = " ".join(f"{k}={v}" for k, v in matrix["overrides"].items())
        intro += f"<p>Overrides on every run: <code>{html.escape(shown)}</code></p>"
    return "\n".join([
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(title)}</title><style>{STYLE}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>", intro, summary_section(root, rows, baselines),
        plots_section(rows, baselines), environment_section(rows),
        config_section(root, rows, baselines),
        "</body></html>", ""])


def build_report(root: Path, baseline: str | None = None) -> tuple[Path, list[RunRow]]:
    """index.html in root (a matrix, or any folder of run folders), written only
    once the whole page is built; returns its path and the rows it shows."""
    root = Path(root)
    rows, matrix, baselines = load_rows(root, baseline)
    page = render(root, rows, matrix, baselines)
    with Staging(root) as stage:
        return stage.commit([stage.text(FILE, page)])[0], rows
