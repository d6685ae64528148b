"""One table for models of every tokenizer: our runs and pretrained baselines
(`make eval-baseline`) side by side on bits per byte.

Token-level perplexity is per token, and a token is whatever a tokenizer made
of the text, so perplexities of models with different tokenizers do not
compare. Bits per byte (total NLL in bits over the UTF-8 bytes of the scored
text) and word-level perplexity (over its whitespace-separated words) do: each
row's eval.json measured them on the same text. The table is sorted on the
bits per byte of the set most rows have; tokens/s and peak memory are those
`make eval` measured, comparable between rows of one machine only.
"""

from __future__ import annotations

import csv
import html
import io
from collections.abc import Callable
from functools import partial
from typing import Any

from lib.results import tables
from lib.results.collect import RunRow

# Which set decides when several are shared by as many rows: the larger and
# more standard first.
PREFERRED = ("wikitext-103", "wikitext-2", "text", "val")

Column = tuple[str, Callable[[RunRow], Any], str]  # header, value, format


def rows_with_bpb(rows: list[RunRow]) -> list[RunRow]:
    return [r for r in rows if r.bits_per_byte]


def deciding_set(rows: list[RunRow]) -> str | None:
    """The set the comparison sorts on: the one most rows measured."""
    counts: dict[str, int] = {}
    for r in rows:
        for name in r.bits_per_byte:
            counts[name] = counts.get(name, 0) + 1
    if not counts:
        return None
    rank = {n: i for i, n in enumerate(PREFERRED)}
    return min(counts, key=lambda n: (-counts[n], rank.get(n, len(rank)), n))


def ordered(rows: list[RunRow]) -> list[RunRow]:
    """Rows with bits per byte, lowest first on the deciding set; rows without
    that set follow by name."""
    chosen, key = rows_with_bpb(rows), deciding_set(rows)
    if key is None:
        return []
    return sorted(
        chosen,
        key=lambda r: (key not in r.bits_per_byte, r.bits_per_byte.get(key, 0.0), r.run_id),
    )


def _measured(r: RunRow, key: str) -> Any:
    return r.measured.get(key)


def _figure(r: RunRow, into: str, name: str) -> float | None:
    """r's figure of one set: bits_per_byte, word_ppl or evals (token perplexity)."""
    return getattr(r, into).get(name)


def _params_m(r: RunRow) -> float | None:
    return r.params / 1e6 if r.params else None


def columns(rows: list[RunRow]) -> list[Column]:
    key = deciding_set(rows)
    sets = sorted({n for r in rows for n in r.bits_per_byte}, key=lambda n: (n != key, n))
    cols: list[Column] = [
        ("model", lambda r: r.run_id, ""),
        ("kind", lambda r: "baseline" if r.status == "pretrained" else "ours", ""),
        ("family", lambda r: r.model, ""),
        ("params M", _params_m, ",.1f"),
    ]
    for name in sets:
        cols += [
            (f"{name} bpb", partial(_figure, into="bits_per_byte", name=name), ".4f"),
            (f"{name} word ppl", partial(_figure, into="word_ppl", name=name), ".2f"),
            (f"{name} token ppl", partial(_figure, into="evals", name=name), ".2f"),
        ]
    cols += [
        ("eval tok/s", partial(_measured, key="tokens_per_sec"), ",.0f"),
        ("peak MiB", partial(_measured, key="peak_memory_mb"), ",.0f"),
        ("machine", partial(_measured, key="machine"), ""),
    ]
    return cols


def caption(rows: list[RunRow]) -> str:
    key = deciding_set(rows)
    machines = {r.measured.get("machine") for r in rows_with_bpb(rows)} - {None}
    where = (
        f"all measured on {next(iter(machines))}"
        if len(machines) == 1
        else "comparable only between rows of the same machine"
    )
    return (
        f"Our runs and pretrained baselines, sorted on {key} bits per byte (lower is "
        f"better). Bits per byte decides: token perplexities of models with different "
        f"tokenizers do not compare; word perplexity does, on the same text. Eval tok/s "
        f"and peak memory were measured by make eval, {where}."
    )


def _cell(value: Any, spec: str) -> str:
    if value is None:
        return "-"
    return format(value, spec) if spec else str(value)


def markdown(rows: list[RunRow]) -> str:
    """The comparison under its heading, or "" when no row has bits per byte."""
    shown = ordered(rows)
    if not shown:
        return ""
    cols = columns(shown)
    parts = ["## Comparison on bits per byte", "", caption(shown), ""]
    parts.append("| " + " | ".join(h for h, _, _ in cols) + " |")
    parts.append("|" + "|".join("---" for _ in cols) + "|")
    for r in shown:
        parts.append("| " + " | ".join(_cell(f(r), s).replace("|", "/") for _, f, s in cols) + " |")
    return "\n".join(parts) + "\n"


def csv_text(rows: list[RunRow]) -> str:
    shown = ordered(rows)
    cols = columns(shown)
    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow([h for h, _, _ in cols])
    for r in shown:
        writer.writerow(
            [
                "" if (v := f(r)) is None else (f"{v:.6g}" if isinstance(v, float) else v)
                for _, f, _ in cols
            ]
        )
    return buf.getvalue()


def cells(rows: list[RunRow]) -> tuple[list[str], list[list[str]]]:
    """(header, body) of the comparison as text cells, for LaTeX and HTML."""
    shown = ordered(rows)
    cols = columns(shown)
    return [h for h, _, _ in cols], [[_cell(f(r), s) for _, f, s in cols] for r in shown]


def html_section(rows: list[RunRow]) -> str:
    """The comparison for index.html, or "" when no row has bits per byte."""
    head, body = cells(rows)
    if not body:
        return ""
    th = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    trs = "".join(
        "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in body
    )
    return (
        f"<h2>Comparison on bits per byte</h2><p>{html.escape(caption(rows))}</p>"
        f'<div class="wide"><table class="measurements"><thead><tr>{th}</tr></thead>'
        f"<tbody>{trs}</tbody></table></div>"
    )


def latex(rows: list[RunRow]) -> str:
    """The comparison as a booktabs table* (tables.tex_table), or ""."""
    head, body = cells(rows)
    if not body:
        return ""
    return "\n".join(
        tables.tex_table(
            True,
            [tables.tex(h) for h in head],
            [[tables.tex(c) for c in row] for row in body],
            tables.tex(caption(rows)),
            "tab:bits-per-byte",
            left=3,
        )
    )
