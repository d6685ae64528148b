"""knlp's GPT-2 symbols as a Kconfig tree, so kconfiglib resolves a knlp file
exactly as knlp's own tree would: its defaults, their conditions, its choices
and which assignments its dependencies ignore.

The tree is rendered from lib/config/knlp/table.py (facts generated from
knlp's Kconfig files) without prompts' text or help: it is a resolver, not a
menu.
"""

from __future__ import annotations

import functools
import tempfile
from pathlib import Path

import kconfiglib

from lib.config.knlp.table import CHOICES, SELECTS, SYMBOLS


def _config(name: str, kind: str, prompt: bool, dep: str, defaults) -> str:
    lines = [f"config {name}", f"\t{kind}" + (' "x"' if prompt else "")]
    if dep != "y":
        lines.append(f"\tdepends on {dep}")
    lines += [f"\tdefault {v}" + (f" if {c}" if c != "y" else "") for v, c in defaults]
    return "\n".join(lines)


def render() -> str:
    """The Kconfig text of knlp's GPT-2 symbols."""
    members = {m for choice in CHOICES for m in choice[0]}
    parts = []
    for names, defaults, dep in CHOICES:
        body = ["choice", '\tprompt "x"']
        if dep != "y":
            body.append(f"\tdepends on {dep}")
        body += [f"\tdefault {v}" + (f" if {c}" if c != "y" else "") for v, c in defaults]
        body += [_config(n, *SYMBOLS[n]) for n in names if n in SYMBOLS]
        parts.append("\n".join(body) + "\nendchoice")
    parts += [_config(name, *row) for name, row in SYMBOLS.items() if name not in members]
    # knlp's `select X` lines, one hidden helper per selected symbol: y exactly when a
    # selector is, and selecting X then, as knlp's selectors do
    parts += [
        f"config {name}__SELECTED\n\tbool\n\tdefault y if {cond}\n\tselect {name}"
        for name, cond in SELECTS.items()
    ]
    return "\n\n".join(parts) + "\n"


@functools.lru_cache(maxsize=1)
def _text() -> str:
    return render()


def open_knlp_table() -> kconfiglib.Kconfig:
    """A fresh kconfiglib tree of knlp's GPT-2 symbols (milliseconds to build)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "Kconfig"
        path.write_text(_text())
        return kconfiglib.Kconfig(str(path), warn_to_stderr=False)


def resolve(text: str) -> kconfiglib.Kconfig:
    """knlp's view of a .config-style text: every table symbol resolved."""
    kconf = open_knlp_table()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "config"
        path.write_text(text)
        kconf.load_config(str(path))
    return kconf
