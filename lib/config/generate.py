"""The two Python files made from Kconfig, as the kernel makes its headers.

* lib/config/symbols.py, from the Kconfig tree (`make schema`): the frozen
  dataclass Symbols, one field per symbol with its Python type (bool, int,
  float for "Allowed X to Y" strings, str, the choices as Literal names), typed
  `X | None` where a dependency can hide it, and the prompt and help as the
  field's docstring; and one frozen dataclass per package, its section (below).
  It is committed, so mypy and an editor know every symbol;
  tests/lib/config/test_typed_config.py fails when it lags behind the Kconfig files.
* config.py, from .config (every command that writes .config): the
  configuration's values as a RunConfig, with the SHA-256 of the .config it
  came from so a hand-edited .config is noticed (lib/config/run_config.py).

Sections. A symbol belongs to the package folder of the Kconfig file defining
it (lib/optim/Kconfig, Kconfig.spam and Kconfig.muon are lib/optim's), not to
its name's prefix. A section is named after its folder's last name,
capitalised (lib/optim: Optim, lib/observe/monitor: Monitor), upper-cased for a
model family's folder at the root, as its symbols' prefix (gpt2: GPT2), and
Root for the top-level Kconfig; Symbols reads it once, as that name
lower-cased (run.optim, run.gpt2, run.root). A builder takes the sections it
reads, so its signature says what it reads.

Off values. Where Kconfig hides a symbol, Symbols holds None and the section
its off value, so that its readers need no `value_or`: False for a bool (what
Kconfig itself gives a hidden bool), else the entry of its package's
off_values.toml (lib/optim/off_values.toml: what the code reads while the
feature is off), checked here against the symbol's type. A hidden symbol
without an entry stays None in its section too: being hidden then means
something its reader decides (OPTIMIZER under a test matrix).
"""

from __future__ import annotations

import hashlib
import json
import keyword
import re
import textwrap
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import kconfiglib

from lib.config.kconfig import ConfigError, float_bounds
from lib.paths import ROOT

SYMBOLS_HEADER = '''"""Every Kconfig symbol as a typed field: generated from the Kconfig files by
`make schema` (lib/config/generate.py). Do not edit; change the Kconfig files
(and a package's off_values.toml).

A field is None when the symbol's dependencies hide it in a configuration;
symbols that nothing can hide are typed without None. A named choice appears
twice: as its own field holding the selected member's lower-cased suffix
(DEVICE = "cpu") and as one bool per member (DEVICE_CPU = True).

Below Symbols, one section per package (Optim, Prune, Train, ...): the symbols
its Kconfig files define, read once per configuration (run.optim), a hidden
one at its off value (the field's default; lib/config/generate.py says how
sections are named and where off values come from).
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from functools import cached_property
from typing import Any, Literal

from lib.config.fields import Fields


# init, repr and eq from Fields, here and below: lib/config/fields.py says why
@dataclass(frozen=True, kw_only=True, init=False, repr=False, eq=False)
class Symbols(Fields):
'''
OFF_VALUES = "off_values.toml"  # a package's off values, beside its Kconfig files
_TAKEN = {"Symbols", "Any", "Literal", "Fields"}  # names symbols.py already binds


def _always_active(dep: object) -> bool:
    return kconfiglib.expr_str(dep) == "y"


def symbol_type(sym: kconfiglib.Symbol) -> str:
    if sym.orig_type in (kconfiglib.BOOL, kconfiglib.TRISTATE):
        base = "bool"
    elif sym.orig_type in (kconfiglib.INT, kconfiglib.HEX):
        base = "int"
    elif float_bounds(sym):
        base = "float"
    else:
        base = "str"
    if sym.choice is not None:
        hideable = sym.direct_dep is not sym.choice or not _always_active(sym.choice.direct_dep)
    else:  # a promptless bool is left out of .config while it is n
        prompted = any(n.prompt and _always_active(n.prompt[1]) for n in sym.nodes)
        hideable = not (_always_active(sym.direct_dep) and prompted)
    return f"{base} | None" if hideable else base


def choice_type(name: str, choice: kconfiglib.Choice) -> str:
    names = ", ".join(f'"{m.name[len(name) + 1 :].lower()}"' for m in choice.syms)
    literal = f"Literal[{names}]"
    return f"{literal} | None" if not _always_active(choice.direct_dep) else literal


def _doc(prompt: str, help_text: str) -> str:
    text = prompt.strip().rstrip(".") + "." if prompt else ""
    if help_text:
        text += "\n\n" + textwrap.dedent(help_text).strip()
    text = text.replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    body = textwrap.indent(text, "    ").lstrip()
    return f'    """{body}\n    """' if "\n" in text else f'    """{body}"""'


def _node_text(item: kconfiglib.Symbol | kconfiglib.Choice) -> tuple[str, str]:
    node = item.nodes[0]
    return (node.prompt[0] if node.prompt else ""), (node.help or "")


@dataclass(frozen=True)
class Entry:
    """One field of Symbols: a symbol or a named choice."""

    name: str
    kind: str  # its type in Symbols, e.g. "float | None"
    item: kconfiglib.Symbol | kconfiglib.Choice

    @property
    def hideable(self) -> bool:
        return self.kind.endswith(" | None")

    @property
    def base(self) -> str:
        """Its type where it is shown ("float")."""
        return self.kind.removesuffix(" | None")


def entries(kconf: kconfiglib.Kconfig) -> list[Entry]:
    """Symbols' fields in Kconfig order, each named choice just before its members."""
    choice_of = {c.syms[0].name: (name, c) for name, c in kconf.named_choices.items() if c.syms}
    out = []
    for sym in kconf.unique_defined_syms:
        if sym.name in choice_of:
            name, choice = choice_of[sym.name]
            out.append(Entry(name, choice_type(name, choice), choice))
        out.append(Entry(sym.name, symbol_type(sym), sym))
    return out


def package_folder(filename: str, root: Path = ROOT) -> str:
    """The folder of a Kconfig file, relative to the tree ("lib/optim"; "" for
    the top-level Kconfig, which kconfiglib names by its full path)."""
    path = Path(filename)
    folder = (path.relative_to(root) if path.is_absolute() else path).parent
    return "" if folder == Path(".") else folder.as_posix()


@dataclass
class Section:
    folder: str  # the package's folder; "" for the top-level Kconfig
    files: list[str] = field(default_factory=list)  # its Kconfig files, as sourced
    entries: list[Entry] = field(default_factory=list)
    off: dict[str, object] = field(default_factory=dict)  # from its off_values.toml

    @property
    def attribute(self) -> str:
        """Symbols' accessor: the folder's last name (run.optim), "root" for the top."""
        return self.folder.rpartition("/")[2].lower() or "root"

    @property
    def name(self) -> str:
        last = self.folder.rpartition("/")[2]
        if not last:
            return "Root"
        family = "/" not in self.folder and self.folder != "lib"  # at the root, like gpt2/
        return last.upper() if family else last.capitalize()  # GPT2, as its symbols' prefix

    def default(self, entry: Entry) -> str:
        """The field's default in the section: its off value, None, or none."""
        if not entry.hideable:
            return ""
        if entry.name in self.off:
            return " = " + _literal(self.off[entry.name])
        return " = False" if entry.base == "bool" else " = None"


def _literal(value: object) -> str:
    return json.dumps(value) if isinstance(value, str) else repr(value)


def sections(kconf: kconfiglib.Kconfig, root: Path = ROOT) -> list[Section]:
    """Symbols' fields grouped by the package folder of the Kconfig file that
    defines each, in Kconfig order, with their off values; a ConfigError lists
    every off value that does not fit its symbol and every clash of names."""
    by_folder: dict[str, Section] = {}
    for entry in entries(kconf):
        filename = entry.item.nodes[0].filename
        folder = package_folder(filename, root)
        section = by_folder.setdefault(folder, Section(folder))
        shown = filename if folder else Path(filename).name
        if shown not in section.files:
            section.files.append(shown)
        section.entries.append(entry)
    problems: list[str] = []
    owner = {e.name: s for s in by_folder.values() for e in s.entries}
    named: dict[str, str] = {name: "a name symbols.py uses" for name in _TAKEN}
    for section in by_folder.values():
        section.off = _off_values(section, owner, root, problems)
        mine = f"the section of {section.folder or 'Kconfig'}"
        clash = named.setdefault(section.name, mine)
        if clash != mine:
            problems.append(
                f"{mine} would be named {section.name}, as {clash} is: rename the folder"
            )
        elif not section.attribute.isidentifier() or keyword.iskeyword(section.attribute):
            problems.append(
                f"{mine} would be run.{section.attribute}, which is no Python name: rename the folder"
            )
    if problems:
        raise ConfigError(problems, "the Kconfig sections (make schema)")
    return list(by_folder.values())


def _off_values(
    section: Section, owner: dict[str, Section], root: Path, problems: list[str]
) -> dict[str, object]:
    """The section's off_values.toml, each value checked against its symbol
    (a float may be written as an integer: 0 is 0.0)."""
    path = root / section.folder / OFF_VALUES
    if not path.is_file():
        return {}
    shown = path.relative_to(root).as_posix()
    try:
        table = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
        problems.append(f"{shown} is not valid TOML ({err}): write NAME = value lines")
        return {}
    mine = {e.name: e for e in section.entries}
    out: dict[str, object] = {}
    for name, value in table.items():
        entry = mine.get(name)
        if entry is None:
            where = owner.get(name)
            problems.append(
                f"{shown} names {name}, which is no Kconfig symbol or named choice"
                if where is None
                else f"{shown} names {name}, which {where.folder or 'the top-level Kconfig'} "
                f"defines: move it to {Path(where.folder, OFF_VALUES).as_posix()}"
            )
        elif not entry.hideable:
            problems.append(
                f"{shown} gives {name} an off value, but nothing hides CONFIG_{name}: remove the line"
            )
        elif (fitting := _fitting(entry.base, value)) is None:
            problems.append(
                f"{shown}: {name} = {json.dumps(value, default=str)} is not {_what(entry.base)}, "
                f"the type of CONFIG_{name}"
            )
        else:
            out[name] = fitting
    return out


def _fitting(base: str, value: object) -> object | None:
    """`value` as a field of type `base` holds it, or None if it cannot."""
    if base.startswith("Literal["):
        return value if isinstance(value, str) and value in re.findall(r'"([^"]*)"', base) else None
    if base == "bool":
        return value if isinstance(value, bool) else None
    if isinstance(value, bool):
        return None
    if base == "int":
        return value if isinstance(value, int) else None
    if base == "float":
        return float(value) if isinstance(value, int | float) else None
    return value if isinstance(value, str) else None


def _what(base: str) -> str:
    if base.startswith("Literal["):
        return "one of " + ", ".join(re.findall(r'"([^"]*)"', base))
    return {"bool": "true or false", "int": "an integer", "float": "a number"}.get(
        base, "a quoted string"
    )


def render_symbols(kconf: kconfiglib.Kconfig, root: Path = ROOT) -> str:
    """lib/config/symbols.py's text: Symbols' fields in Kconfig order, each
    named choice just before its members, its section accessors, then the sections."""
    parts = sections(kconf, root)
    lines = [SYMBOLS_HEADER.rstrip("\n")]
    for entry in entries(kconf):
        default = " = None" if entry.hideable else ""
        lines += [f"    {entry.name}: {entry.kind}{default}", _doc(*_node_text(entry.item)), ""]
    for section in parts:
        lines += [
            "    @cached_property",
            f"    def {section.attribute}(self) -> {section.name}:",
            f'        """{_summary(section)}; hidden ones at their off values."""',
            f"        return {section.name}(**_shown(self, {section.name}))",
            "",
        ]
    lines += [
        "",
        "def _shown(symbols: Symbols, section: Any) -> dict[str, Any]:",
        '    """The section\'s symbols that are shown; a hidden one (None) takes the',
        '    field\'s default, its off value."""',
        "    return {f.name: v for f in fields(section) if (v := getattr(symbols, f.name)) is not None}",
    ]
    for section in parts:
        lines += [
            "",
            "",
            "@dataclass(frozen=True, kw_only=True, init=False, repr=False, eq=False)",
            f"class {section.name}(Fields):",
            f'    """{_summary(section)} ({", ".join(section.files)})."""',
            "",
        ]
        for entry in section.entries:
            kind = entry.base if section.default(entry) not in ("", " = None") else entry.kind
            prompt = _node_text(entry.item)[0].strip()
            comment = f"  # {prompt}" if prompt else ""
            lines.append(f"    {entry.name}: {kind}{section.default(entry)}{comment}")
    return "\n".join(lines).rstrip("\n") + "\n"


def _summary(section: Section) -> str:
    if not section.folder:
        return "The top-level Kconfig's own symbols"
    return f"{section.folder}'s settings"


def config_sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def render_config_py(values: dict[str, object], prompts: dict[str, str], source_text: str) -> str:
    """config.py's text: the values of one .config as a RunConfig."""
    lines = [
        '"""This configuration\'s values: generated from .config by scripts/kconfig.py',
        "(make defconfig-*, make menuconfig, make olddefconfig). Do not edit: change",
        "the configuration with `make menuconfig`. Scripts load it through",
        "lib.config.run_config.load_run_config; each field's type and help are in",
        'lib/config/symbols.py."""',
        "from lib.config.run_config import RunConfig",
        "",
        f'SOURCE_SHA256 = "{config_sha256(source_text)}"  # of the .config it was made from',
        "",
        "CONFIG = RunConfig(",
    ]
    for name, value in values.items():
        prompt = prompts.get(name, "")
        lines.append(f"    {name}={value!r},{f'  # {prompt}' if prompt else ''}")
    lines.append(")")
    return "\n".join(lines) + "\n"


def prompts(kconf: kconfiglib.Kconfig) -> dict[str, str]:
    out = {name: _node_text(c)[0] for name, c in kconf.named_choices.items()}
    out.update({s.name: _node_text(s)[0] for s in kconf.unique_defined_syms})
    return out
