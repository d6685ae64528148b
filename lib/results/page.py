"""The HTML building blocks of `make report`'s page (lib/results/report.py): the
stylesheet, tables of pre-escaped cells, relative links and the anchor of each run.
"""

from __future__ import annotations

import html
from pathlib import Path
from urllib.parse import quote

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


def table(headers: list[str], rows: list[list[tuple[str, str]]], cls: str) -> str:
    """rows of (cell HTML, css class) under escaped headers."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "\n".join(
        "<tr>"
        + "".join(f'<td class="{c}">{cell}</td>' if c else f"<td>{cell}</td>" for cell, c in row)
        + "</tr>"
        for row in rows
    )
    return (
        f'<table class="{cls}">\n<thead><tr>{head}</tr></thead>\n<tbody>\n{body}\n</tbody></table>'
    )


def href(root: Path, path: Path) -> str:
    try:
        return quote(path.relative_to(root).as_posix())
    except ValueError:
        return path.resolve().as_uri()


def anchor(run_id: str) -> str:
    return "run-" + quote(run_id, safe="")
