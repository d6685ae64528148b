"""The shape of the tree: Kconfig discipline, one config reader, every script named
by the Makefile, every symbol read. How code is split into files is a review rule
(docs/development.md, "Files"), not a line count."""

from __future__ import annotations

import re
from pathlib import Path

import kconfiglib

from lib.config.kconfig import open_tree

ROOT = Path(__file__).resolve().parent.parent
PY_SOURCES = [p for d in ("lib", "gpt2", "hamt", "scripts") for p in (ROOT / d).rglob("*.py")]
CONFIG_READERS = {
    "lib/config/kconfig.py",
    "lib/config/run_config.py",
    "lib/config/overrides.py",
    "lib/config/menu.py",
    "lib/config/generate.py",
    "lib/config/lengths.py",  # SCALE_ITERS reads the lengths it scales from the tree
    # the original project's configurations (lib/config/knlp/)
    "lib/config/knlp/tree.py",
    "lib/config/knlp/translate.py",
    "lib/config/knlp/source.py",
    "lib/knlpcheck/check.py",
    "lib/knlpcheck/optim.py",
    "lib/config/knlp/translate_optim.py",
    "lib/config/knlp/translate_mla.py",
    "lib/config/knlp/code.py",
}


def test_every_prompted_symbol_and_choice_has_help():
    kconf = open_tree()
    missing = [
        s.name
        for s in kconf.unique_defined_syms
        if s.choice is None and any(n.prompt for n in s.nodes) and not any(n.help for n in s.nodes)
    ]
    missing += [c.name or str(c) for c in kconf.unique_choices if not any(n.help for n in c.nodes)]
    assert missing == []


def test_every_int_symbol_has_a_range():
    kconf = open_tree()
    assert [
        s.name for s in kconf.unique_defined_syms if s.orig_type == kconfiglib.INT and not s.ranges
    ] == []


def test_only_the_config_modules_read_kconfig():
    offenders = [
        str(p.relative_to(ROOT))
        for p in PY_SOURCES
        if str(p.relative_to(ROOT)) not in CONFIG_READERS
        and re.search(r"import kconfiglib|open\([^)]*\.config\b", p.read_text())
    ]
    assert offenders == []


def test_every_script_a_makefile_recipe_names_exists():
    named = set(
        re.findall(r"((?:scripts|lib)/[\w/.-]+\.(?:py|sh))", (ROOT / "Makefile").read_text())
    )
    assert named and [p for p in named if not (ROOT / p).exists()] == []


def _read_by_kconfig(kconf) -> set[str]:
    """Symbols other symbols' defaults or dependencies read (e.g. MODEL_GPT2)."""
    names: set[str] = set()
    for sym in kconf.unique_defined_syms:
        exprs = [sym.direct_dep] + [c for _, c in sym.defaults] + [v for v, _ in sym.defaults]
        for expr in exprs:
            names |= {
                s.name
                for s in kconfiglib.expr_items(expr)
                if isinstance(s, kconfiglib.Symbol) and s is not sym
            }
    return names


def test_every_symbol_has_a_reader():
    """A symbol lands with the code that reads it: by name in Python, as a family
    config field (gpt2.SYMBOLS), as an attention variant's test-matrix switch
    (gpt2/variants.py), as a choice member, or from other symbols."""
    import gpt2
    import hamt
    from gpt2.variants import VARIANTS

    kconf = open_tree()
    source = "\n".join(p.read_text() for p in PY_SOURCES)
    family_fields = (
        set(gpt2.SYMBOLS.values())
        | set(hamt.SYMBOLS.values())
        | {v.matrix_symbol for v in VARIANTS}
    )
    by_kconfig = _read_by_kconfig(kconf)
    unread = [
        s.name
        for s in kconf.unique_defined_syms
        if s.choice is None
        and s.name not in family_fields
        and s.name not in by_kconfig
        and not re.search(rf"\b{s.name}\b", source)
    ]
    unread += [
        c.name
        for c in kconf.unique_choices
        if c.name and c.name not in family_fields and not re.search(rf"\b{c.name}\b", source)
    ]
    assert unread == []
