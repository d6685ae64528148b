"""The shape of the tree: Kconfig discipline, one config reader, size limits."""
from __future__ import annotations

import re
from pathlib import Path

import kconfiglib

from lib.kconfig import open_tree

ROOT = Path(__file__).resolve().parent.parent
PY_SOURCES = [p for d in ("lib", "gpt2", "scripts") for p in (ROOT / d).rglob("*.py")]
CONFIG_READERS = {"lib/kconfig.py", "lib/config.py", "lib/overrides.py"}


def test_every_prompted_symbol_and_choice_has_help():
    kconf = open_tree()
    missing = [s.name for s in kconf.unique_defined_syms
               if s.choice is None and any(n.prompt for n in s.nodes)
               and not any(n.help for n in s.nodes)]
    missing += [c.name or str(c) for c in kconf.unique_choices if not any(n.help for n in c.nodes)]
    assert missing == []


def test_every_int_symbol_has_a_range():
    kconf = open_tree()
    assert [s.name for s in kconf.unique_defined_syms
            if s.orig_type == kconfiglib.INT and not s.ranges] == []


def test_only_the_config_modules_read_kconfig():
    offenders = [str(p.relative_to(ROOT)) for p in PY_SOURCES
                 if str(p.relative_to(ROOT)) not in CONFIG_READERS
                 and re.search(r"import kconfiglib|open\([^)]*\.config\b", p.read_text())]
    assert offenders == []


def test_every_script_a_makefile_recipe_names_exists():
    named = set(re.findall(r"((?:scripts|lib)/[\w/.-]+\.(?:py|sh))", (ROOT / "Makefile").read_text()))
    assert named and [p for p in named if not (ROOT / p).exists()] == []


def test_modules_stay_under_the_line_ceiling():
    long = {str(p.relative_to(ROOT)): n for p in PY_SOURCES + list((ROOT / "tests").rglob("*.py"))
            if (n := len(p.read_text().splitlines())) > 400}
    assert long == {}
