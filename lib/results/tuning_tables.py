"""The tuning table of a tuned matrix (lib/results/tuning.py) in Markdown, CSV
and LaTeX, and its cells for the HTML report: per configuration the tuned
values, the search ranges, the trials complete, pruned and failed (and
running, while any is), the best trial's loss, and the symbols whose best
value hit an end of their range. The budget, the same for every
configuration, is stated once above the table."""

from __future__ import annotations

import csv
import io

from lib.results import tables
from lib.results.tuning import EDGE, Study, Tuning, budgets

CURVE = "tuning_curve.png"
EDGE_NOTE = (
    f"Edge: the best value lies in the outer {100 * EDGE:g} % of its search range (on a log "
    f"scale for a log range), so a better value may lie outside the range searched: widen "
    f"that range and tune again before trusting this configuration's comparison."
)
TUNED_BASELINE = (
    "The runs and seed statistics that follow are the final runs, each configuration at its "
    "tuned values: the baseline is the tuned baseline, so every comparison is tuned against "
    "tuned."
)


def value(x: float) -> str:
    return f"{x:.4g}"


def _tuned(s: Study) -> str:
    return ", ".join(f"{k}={value(v)}" for k, v in s.tuned.items()) or "-"


def _ranges(s: Study) -> str:
    return ", ".join(
        f"{x.name} {value(x.low)} to {value(x.high)}" + (" (log)" if x.log else "")
        for x in s.symbols
    )


def _edge(s: Study) -> str:
    return ", ".join(f"{x.name} at the {x.edge} end" for x in s.edges)


def _best(s: Study) -> str:
    if s.best_value is None:
        return "-"
    trial = f" (trial {s.best_trial})" if s.best_trial is not None else ""
    return f"{s.best_value:.3f}{trial}"


def _running(t: Tuning) -> bool:
    return any(s.count("running") for s in t.studies)


def header(t: Tuning) -> list[str]:
    counts = ["complete", "pruned", "failed"] + (["running"] if _running(t) else [])
    return ["configuration", "tuned values", "search range", *counts, "best trial loss", "edge"]


def cells(t: Tuning, s: Study, name: str) -> list[str]:
    """One row as plain text, in header(t)'s order; name is the configuration's."""
    counts = [s.count("complete"), s.count("pruned"), s.count("fail")]
    counts += [s.count("running")] if _running(t) else []
    return [name, _tuned(s), _ranges(s), *map(str, counts), _best(s), _edge(s)]


def intro(t: Tuning) -> str:
    """The budget (once, or each where they differ) and what the table shows."""
    shared = budgets(t)
    if len(shared) == 1:
        budget = f"Every configuration was tuned with the same budget: {next(iter(shared))}."
    else:
        budget = "The budgets differ, so this is not an equal-budget comparison: " + "; ".join(
            f"{b} ({', '.join(c)})" for b, c in shared.items()
        )
    running = " Trials still running are counted as such." if _running(t) else ""
    return (
        f"{budget} Best trial loss: the lowest validation loss (nats/token; nats/character "
        f"for a study on the loss per character) of a complete "
        f"trial, a shorter run than the final ones; {CURVE} plots it trial by trial."
        f"{running} {TUNED_BASELINE}"
    )


def markdown(t: Tuning, problems: list[str]) -> str:
    """The "## Tuning" section of summary.md; problems are listed under it."""
    warnings = [f"- warning: {p}" for p in problems] + ([""] if problems else [])
    if not t.studies:
        return "\n".join(["## Tuning", "", "No tuning record could be read:", "", *warnings])
    head = header(t)
    lines = ["## Tuning", "", intro(t), "", "| " + " | ".join(head) + " |"]
    lines.append("|" + "|".join("---" for _ in head) + "|")
    for s in t.studies:
        lines.append("| " + " | ".join(c.replace("|", "/") for c in cells(t, s, s.config)) + " |")
    lines += ["", EDGE_NOTE, "", *warnings]
    return "\n".join(lines)


def csv_text(t: Tuning) -> str:
    """summary_tuning.csv: one row per configuration, every number in its own column."""
    names = list(dict.fromkeys(x.name for s in t.studies for x in s.symbols))
    head = [
        "configuration",
        "study",
        "complete",
        "pruned",
        "failed",
        "running",
        "best_loss",
        "best_trial",
        "trials",
        "steps_per_trial",
        "fraction_of_max_iters",
        "sampler",
        "pruner",
        "sampler_seed",
    ]
    for n in names:
        head += [n, f"{n}_low", f"{n}_high", f"{n}_log", f"{n}_edge"]
    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow(head)
    for s in t.studies:
        b = s.budget
        row = [
            s.config,
            s.study,
            s.count("complete"),
            s.count("pruned"),
            s.count("fail"),
            s.count("running"),
            s.best_value,
            s.best_trial,
            b.get("trials"),
            b.get("steps_per_trial"),
            b.get("fraction_of_max_iters"),
            b.get("sampler"),
            b.get("pruner"),
            b.get("seed"),
        ]
        symbols = {x.name: x for x in s.symbols}
        for n in names:
            x = symbols.get(n)
            row += [x.best, x.low, x.high, "y" if x.log else "n", x.edge or ""] if x else [None] * 5
        writer.writerow(
            ["" if v is None else f"{v:.6g}" if isinstance(v, float) else v for v in row]
        )
    return buf.getvalue()


def latex(t: Tuning, names: dict[str, str]) -> str:
    """The tuning table (booktabs, a table* over the text width), configurations
    by name; the budget and the edge note in its caption."""
    body = [[tables.tex(c) for c in cells(t, s, names.get(s.config, s.config))] for s in t.studies]
    caption = tables.tex(f"Tuning. {intro(t)} {EDGE_NOTE}")
    return "\n".join(
        tables.tex_table(
            True, [tables.tex(h) for h in header(t)], body, caption, "tab:tuning", left=3
        )
    )
