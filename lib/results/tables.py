"""The summary tables as Markdown (one table per model), CSV and LaTeX
(booktabs): one row per run, and where configurations ran with several seeds,
one row per configuration (lib/results/seeds.py)."""

from __future__ import annotations

import csv
import io
from collections.abc import Callable
from functools import partial
from typing import Any

from lib.results import labels, seeds, slots
from lib.results.collect import RunRow
from lib.results.stats import Spread

Column = tuple[str, Callable[[RunRow], Any], str]  # header, value, format
MONITOR_COLUMNS = [
    ("gpu_util_mean", "GPU util % mean"),
    ("gpu_util_max", "GPU util % max"),
    ("power_w_mean", "power W mean"),
    ("power_w_max", "power W max"),
    ("cpu_percent_mean", "CPU % mean"),
    ("rss_mb_max", "RSS MiB max"),
]


def _monitor(r: RunRow, key: str) -> float | None:
    monitor = r.metrics.get("monitor")
    value = monitor.get(key) if isinstance(monitor, dict) else None
    return value if isinstance(value, (int, float)) else None


def _eval(r: RunRow, name: str) -> float | None:
    return r.evals.get(name)


def _score(r: RunRow, name: str) -> float | None:
    return r.scores.get(name)


# metrics.json's "inference" section (lib/bench/inference.py): per prompt length.
INFERENCE_COLUMNS = [
    ("prefill_ms", "prefill ms", 1, ".2f"),
    ("decode_tokens_per_sec", "decode tok/s", 1, ",.0f"),
    ("cache_bytes", "cache KiB", 1 / 1024, ",.0f"),
]


def _inference_rows(r: RunRow) -> list[dict[str, Any]]:
    section = r.metrics.get("inference")
    entries = section.get("lengths") if isinstance(section, dict) else None
    return [e for e in entries if isinstance(e, dict)] if isinstance(entries, list) else []


def _inference(r: RunRow, length: int, key: str, scale: float) -> float | None:
    for entry in _inference_rows(r):
        value = entry.get(key)
        if entry.get("prompt_tokens") == length and isinstance(value, (int, float)):
            return value * scale
    return None


def format_value(value: Any, spec: str) -> str:
    """A table cell: "-" for unknown, else the value in the column's format."""
    if value is None:
        return "-"
    return format(value, spec) if spec else str(value)


def _tuned(r: RunRow, name: str) -> float | None:
    return r.tuned.get(name)


def tuned_note(r: RunRow | None) -> str:
    """ " (tuned: LEARNING_RATE=0.003)" after a tuned baseline's name; "" when untuned."""
    if r is None or not r.tuned:
        return ""
    return " (tuned: " + ", ".join(f"{k}={v:.4g}" for k, v in r.tuned.items()) + ")"


def _status(r: RunRow) -> str:
    status = "reused" if r.reused_from and r.status == "completed" else r.status
    return status + (f" ({'; '.join(r.problems)})" if r.problems else "")


def _own(r: RunRow, value: str | None, section: str, key: str) -> str | None:
    """A method of the user's own ("custom") with what it ran: the class or function
    its record names (two custom runs may be two methods)."""
    named = (r.metrics.get(section) or {}).get(key) if value == "custom" else None
    return f"custom ({named})" if named else value


def columns(rows: list[RunRow]) -> list[Column]:
    cols: list[Column] = [
        ("run", lambda r: r.run_id, ""),
        *([("seed", lambda r: r.seed, "")] if seeds.has_seeds(seeds.configurations(rows)) else []),
        ("optimizer", lambda r: _own(r, r.optimizer, "optimizer_custom", "class"), ""),
        ("pruning", lambda r: _own(r, r.pruning, "pruning_custom", "function"), ""),
        (
            "sparsity",
            lambda r: (
                100 * r.sparsity
                if r.sparsity is not None
                else (100 * r.sparsity_target if r.sparsity_target else None)
            ),
            ".1f",
        ),
        ("variant", lambda r: r.variant, ""),
        ("best ppl", lambda r: r.best_ppl, ".2f"),
        ("final ppl", lambda r: r.final_ppl, ".2f"),
        ("delta %", lambda r: r.delta_pct, "+.1f"),
        ("tokens/s", lambda r: r.tokens_per_sec, ",.0f"),
        ("peak GiB", lambda r: r.peak_memory_mb / 1024 if r.peak_memory_mb else None, ".2f"),
        ("mem x weights", lambda r: r.memory_x_weights, ".1f"),
        ("wall min", lambda r: r.wall_time_s / 60 if r.wall_time_s is not None else None, ".1f"),
    ]
    if any(seeds.per_char(r) is not None for r in rows):  # older runs lack it
        cols.insert(
            [c[0] for c in cols].index("delta %"), ("best nats/char", seeds.per_char, ".4f")
        )
    # The values a tuned matrix's final runs ran at (lib/results/tuning.py).
    for name in dict.fromkeys(k for r in rows for k in r.tuned):
        cols.append((f"tuned {name}", partial(_tuned, name=name), ".4g"))
    cols += slots.columns(rows)  # HAMT's final slot use, where a run recorded it
    # The run monitor's summary (metrics.json "monitor"), where any run has one.
    for key, header in MONITOR_COLUMNS:
        if any(
            isinstance(r.metrics.get("monitor"), dict) and key in r.metrics["monitor"] for r in rows
        ):
            cols.append((header, partial(_monitor, key=key), ".0f"))
    for length in sorted(
        {
            e["prompt_tokens"]
            for r in rows
            for e in _inference_rows(r)
            if isinstance(e.get("prompt_tokens"), int)
        }
    ):
        cols += [
            (f"{header} @{length}", partial(_inference, length=length, key=key, scale=scale), spec)
            for key, header, scale, spec in INFERENCE_COLUMNS
        ]
    for name in sorted({k for r in rows for k in r.evals}):
        cols.append((f"{name} ppl", partial(_eval, name=name), ".2f"))
    for name in sorted({k for r in rows for k in r.scores}):  # lm-eval: "hellaswag acc_norm"
        cols.append((name, partial(_score, name=name), ".3f"))
    cols.append(("status", _status, ""))
    return cols


def by_model(rows: list[RunRow]) -> dict[str, list[RunRow]]:
    out: dict[str, list[RunRow]] = {}
    for r in rows:
        out.setdefault(r.model or "unknown", []).append(r)
    return out


def markdown(rows: list[RunRow], baselines: dict[str, RunRow]) -> str:
    parts = []
    for model, group in by_model(rows).items():
        cols = columns(group)
        base = baselines.get(model)
        parts.append(
            f"### {model}\n\nBaseline: "
            f"{base.run_id + tuned_note(base) if base else 'none (no dense AdamW run)'}"
            f"; delta % is best perplexity relative to it (a seeded run: to its seed's "
            f"baseline run); sparsity is the final measured share of zeros among the "
            f"prunable weights, the blocks' matrices (embeddings are never pruned; the "
            f"target where the run has none).\n"
        )
        parts.append("| " + " | ".join(h for h, _, _ in cols) + " |")
        parts.append("|" + "|".join("---" for _ in cols) + "|")
        for r in group:
            cells = (format_value(f(r), s).replace("|", "/") for _, f, s in cols)
            parts.append("| " + " | ".join(cells) + " |")
        parts.append("")
    return "\n".join(parts)


def csv_text(rows: list[RunRow]) -> str:
    cols = [("model", lambda r: r.model, "")] + columns(rows)
    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow([h for h, _, _ in cols])
    for r in rows:
        writer.writerow(
            [
                "" if (v := f(r)) is None else (f"{v:.6g}" if isinstance(v, float) else v)
                for _, f, _ in cols
            ]
        )
    return buf.getvalue()


_TEX = str.maketrans({"_": r"\_", "%": r"\%", "&": r"\&", "#": r"\#", "$": r"\$"})
TEX_PREAMBLE = (
    r"% Tables for \usepackage{booktabs} and \usepackage{adjustbox}: a few key columns"
    "\n% in a one-column table, every column in a two-column table*; each is shrunk"
    "\n% to the column or text width when wider (adjustbox's max width).\n"
)
KEY_COLUMNS = ("sparsity", "best ppl", "delta %", "tokens/s", "peak GiB")  # the one-column table


def tex_table(
    wide: bool, head: list[str], body: list[list[str]], caption: str, label: str, left: int = 1
) -> list[str]:
    """A booktabs table of escaped cells: table* over the text width when wide,
    else table over one column; never wider than that width."""
    env, width = ("table*", r"\textwidth") if wide else ("table", r"\columnwidth")
    return [
        rf"\begin{{{env}}}[t]",
        r"\centering",
        r"\small",
        rf"\begin{{adjustbox}}{{max width={width}}}",
        r"\begin{tabular}{" + "l" * left + "r" * (len(head) - left) + "}",
        r"\toprule",
        " & ".join(head) + r" \\",
        r"\midrule",
        *(" & ".join(r) + r" \\" for r in body),
        r"\bottomrule",
        r"\end{tabular}",
        r"\end{adjustbox}",
        rf"\caption{{{caption}}}",
        rf"\label{{{label}}}",
        rf"\end{{{env}}}",
        "",
    ]


def _run_names(rows: list[RunRow]) -> dict[int, str]:
    """id(row) -> its configuration's name (lib/results/labels.py), and its
    seed where the configuration has several."""
    configs = seeds.configurations(rows)
    names = labels.names(configs)
    out = {}
    for c in configs:
        for s, r in c.runs.items():
            out[id(r)] = names[c.key] + (f" (seed {s})" if len(c.runs) > 1 else "")
    return out


def latex(rows: list[RunRow], baselines: dict[str, RunRow]) -> str:
    """Per model, the key columns in a one-column table and every column in a
    table*, rows named by configuration (\\usepackage{booktabs,adjustbox})."""
    parts = []
    named = _run_names(rows)
    for model, group in by_model(rows).items():
        cols: list[Column] = [("configuration", lambda r: named[id(r)], "")]
        cols += [c for c in columns(group) if c[0] not in ("run", "seed", "status")]
        cols.append(("status", lambda r: r.status, ""))
        pruned = any(r.pruning != "none" for r in group)
        key = [cols[0]] + [
            c for c in cols if c[0] in KEY_COLUMNS and (pruned or c[0] != "sparsity")
        ]
        base = baselines.get(model)
        against = (
            named[id(base)]
            if base is not None and id(base) in named
            else base.run_id
            if base
            else "no baseline"
        ) + tuned_note(base)
        for wide, chosen in ((False, key), (True, cols)):
            head = [h.translate(_TEX) for h, _, _ in chosen]
            body = [[format_value(f(r), s).translate(_TEX) for _, f, s in chosen] for r in group]
            what = "every figure" if wide else "best validation perplexity and cost"
            caption = (
                f"{model}: {what} per run; delta % is best perplexity against {against}"
            ).translate(_TEX)
            parts += tex_table(
                wide, head, body, caption, f"tab:{model}-{'runs-all' if wide else 'runs'}"
            )
    return "\n".join(parts)


def _seed_tables(
    groups: list[seeds.ModelSummaries],
) -> list[tuple[seeds.ModelSummaries, list[str], list[list[str]]]]:
    return [(g, seeds.header(g), [seeds.cells(g, row) for row in g.rows]) for g in groups]


SEED_INTRO = (
    "Runs that differ only by TRAIN_SEED are one configuration. Each figure is the mean ± "
    "sample sd over its finished seeds (n; failed and unfinished seeds are counted, never "
    "averaged, a seed whose record is unreadable among the failed; summary_seeds.csv adds "
    "the 95 % intervals). Paired Δ best ppl: the "
    "configuration minus the baseline configuration, seed by seed over the seeds both "
    "finished: mean [95 % interval] (pairs, paired t-test p; Wilcoxon p from 6 non-zero "
    "differences); * where the interval excludes zero."
)


def _baseline_line(g: seeds.ModelSummaries) -> str:
    return g.baseline.key if g.baseline else "none (no dense AdamW run)"


def baseline_prose(g: seeds.ModelSummaries) -> str:
    """The baseline configuration, with its tuned values where it was tuned."""
    first = next(iter(g.baseline.runs.values())) if g.baseline else None
    return _baseline_line(g) + tuned_note(first)


def seeds_markdown(groups: list[seeds.ModelSummaries]) -> str:
    """The seed table of each model under a "## Seed statistics" heading."""
    return "\n".join(["## Seed statistics", "", SEED_INTRO, "", *seed_table_lines(groups)])


def seed_table_lines(groups: list[seeds.ModelSummaries], recorded: bool = False) -> list[str]:
    """Each model's seed table in Markdown, its baseline said above it.
    recorded: the groups come from a record (seed_record.from_record), which keeps
    no tuned values to name."""
    parts = []
    for g, head, body in _seed_tables(groups):
        base = _baseline_line(g) if recorded else baseline_prose(g)
        parts += [
            f"**{g.model}**: baseline configuration {base}.",
            "",
            "| " + " | ".join(head) + " |",
            "|" + "|".join("---" for _ in head) + "|",
        ]
        parts += ["| " + " | ".join(c.replace("|", "/") for c in cells) + " |" for cells in body]
        parts.append("")
    return parts


def _number(x: float | int | bool | None) -> str:
    if x is None:
        return ""
    if isinstance(x, bool):
        return "y" if x else "n"
    return f"{x:.6g}" if isinstance(x, float) else str(x)


def _spread_fields(s: Spread) -> list[float | int | None]:
    return [s.mean, s.sd, s.ci_low, s.ci_high, s.n]


def seeds_csv(groups: list[seeds.ModelSummaries]) -> str:
    """summary_seeds.csv: per configuration, mean, sd, 95 % interval and n of
    each figure, and the paired difference of best perplexity from the baseline."""
    figs = groups[0].figures if groups else []
    head = ["model", "configuration", "baseline", "seeds", "n", "failed", "unfinished"]
    for f in figs:
        head += [f"{f.name}_{x}" for x in ("mean", "sd", "ci_low", "ci_high", "n")]
    head += [
        f"delta_best_ppl_{x}"
        for x in ("mean", "ci_low", "ci_high", "n", "p_t", "p_wilcoxon", "excludes_zero")
    ]
    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow(head)
    for g in groups:
        for row in g.rows:
            c, d = row.config, row.versus
            numbers: list[float | int | bool | None] = [len(c.done), c.failed, c.unfinished]
            for f in figs:
                numbers += _spread_fields(row.spreads[f.name])
            numbers += (
                [d.diff, d.ci_low, d.ci_high, d.n, d.p_t, d.p_wilcoxon, d.excludes_zero]
                if d is not None
                else [None] * 7
            )
            writer.writerow(
                [g.model, c.key, _baseline_line(g), c.seed_text, *(_number(x) for x in numbers)]
            )
    return buf.getvalue()


def tex(text: str) -> str:
    """A cell in LaTeX: specials escaped, then ± < Δ in math mode."""
    return text.translate(_TEX).replace("±", r"$\pm$").replace("<", "$<$").replace("Δ", r"$\Delta$")


def seeds_latex(groups: list[seeds.ModelSummaries]) -> str:
    """The seed table of each model (booktabs, a table* over the text width),
    the Markdown cells escaped, configurations by name."""
    parts = []
    for g, head, body in _seed_tables(groups):
        names = labels.names([row.config for row in g.rows])
        body = [[names.get(cells[0], cells[0]), *cells[1:]] for cells in body]
        caption = tex(
            f"{g.model}: mean ± sample sd over seeds; paired Δ of best perplexity "
            f"against {baseline_prose(g)} with its 95 % interval and t-test p; "
            f"* where the interval excludes zero"
        )
        parts += tex_table(
            True,
            [tex(h) for h in head],
            [[tex(c) for c in r] for r in body],
            caption,
            f"tab:{g.model}-seeds",
            left=2,
        )
    return "\n".join(parts)
