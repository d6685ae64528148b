"""The report's configuration section: each run's typed configuration (read from
its config.txt) against its model's baseline run, the symbols a user sets that differ.
"""

from __future__ import annotations

import html
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from lib.config.kconfig import ConfigError, open_tree
from lib.config.run_config import load_run_config
from lib.results import page, tables
from lib.results.collect import RunRow

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


def config_diff(
    base: dict[str, Any],
    run: dict[str, Any],
    shown: set[str] | None = None,
    first: Iterable[str] = (),
) -> Diff:
    """(symbol, baseline value, run value) for each symbol in `shown` (all when None)
    whose typed value differs, the symbols in `first` (the run's overrides)
    leading; _UNSET where a side has no value."""
    names = list(run) + [n for n in base if n not in run]
    changed = [
        n
        for n in names
        if base.get(n, _UNSET) != run.get(n, _UNSET) and (shown is None or n in shown)
    ]
    first = list(first)
    changed.sort(key=lambda n: first.index(n) if n in first else len(first))
    return [(n, base.get(n, _UNSET), run.get(n, _UNSET)) for n in changed]


def _shown(value: Any) -> str:
    if value is _UNSET:
        return "(not set)"
    if isinstance(value, bool):
        return "y" if value else "n"
    return repr(value) if isinstance(value, float) else str(value)


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
            parts.append(f'<h3 id="{page.anchor(r.run_id)}">{html.escape(r.run_id)}</h3>')
            mine, ref_values = values[r.run_id], values[ref.run_id] if ref else None
            if isinstance(mine, str):
                parts.append(f'<p class="missing">{html.escape(mine)}</p>')
            elif ref is None or not isinstance(ref_values, dict):
                parts.append('<p class="missing">no baseline configuration to compare with</p>')
            elif len(rows) == 1:
                parts.append(
                    f"<p>The only run here; its whole configuration is in "
                    f'<a href="{page.href(root, r.path / "config.txt")}">config.txt</a>.</p>'
                )
            elif ref.run_id == r.run_id:
                parts.append("<p>The baseline run.</p>")
            else:
                diff = config_diff(ref_values, mine, shown, r.overrides)  # overrides first
                count = (
                    "1 symbol differs" if len(diff) == 1 else f"{len(diff) or 'no'} symbols differ"
                )
                parts.append(f"<p>Against <code>{html.escape(ref.run_id)}</code>: {count}.</p>")
                if diff:
                    parts.append(
                        page.table(
                            ["symbol", "baseline", "this run"],
                            [
                                [
                                    (html.escape(n), ""),
                                    (html.escape(_shown(b)), ""),
                                    (html.escape(_shown(v)), ""),
                                ]
                                for n, b, v in diff
                            ],
                            "config-diff",
                        )
                    )
    return "\n".join(parts)
