"""Strict Kconfig: load a configuration and refuse anything kconfiglib would bend.

kconfiglib, like the kernel's tools, quietly replaces an out-of-range int by its
default, ignores a value for a symbol whose dependencies are unmet and skips
unknown symbols and malformed lines with at most a warning. Here each of those
is an error that names the file, line, symbol, the value asked and what is
allowed, and nothing is written until the whole configuration is clean.

Floats: Kconfig has no float type, so floats are `string` symbols whose help
text states their bounds as "Allowed <low> to <high>" (inclusive). That phrase
is the single, machine-read source of the bounds.
"""

from __future__ import annotations

import contextlib
import difflib
import math
import os
import re
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import kconfiglib

from lib.config.knlp.names import ROWS as KNLP_ROWS
from lib.config.knlp.translate import is_knlp, translate
from lib.config.renames import RENAMED, current_name, rewrite
from lib.paths import KCONFIG, ROOT

_NUMBER = r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?"
_ALLOWED = re.compile(rf"Allowed\s+({_NUMBER})\s+to\s+({_NUMBER})")
_ASSIGN = re.compile(r"^\s*(?:CONFIG_(\w+)=|#\s*CONFIG_(\w+) is not set)")
_INT_SYNTAX = {kconfiglib.INT: r"-?[0-9]+", kconfiglib.HEX: r"(0[xX])?[0-9a-fA-F]+"}
SHOWN_CHARS = 40  # a longer value is shown cut, with its length (clipped)


class ConfigError(Exception):
    """One or more problems with a configuration; str() lists them all."""

    def __init__(self, problems: list[str], source: str = ""):
        self.problems = problems
        head = f"invalid configuration{f' ({source})' if source else ''}:"
        super().__init__("\n".join([head] + [f"  - {p}" for p in problems]))


@dataclass(frozen=True)
class Asked:
    """A value a user asked for, and where (file:line or 'override NAME=...')."""

    value: str
    where: str
    before: str | None = None  # an override's: the value the configuration gave it


@contextlib.contextmanager
def _in_root():
    """Kconfig `source` lines and the file names in its messages are relative
    to the project root."""
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        yield
    finally:
        os.chdir(cwd)


def open_tree() -> kconfiglib.Kconfig:
    """Parse the Kconfig tree; any Kconfig warning is a bug in the tree."""
    with _in_root():
        kconf = kconfiglib.Kconfig(str(KCONFIG), warn_to_stderr=False)
    if kconf.warnings:
        raise ConfigError(kconf.warnings, "Kconfig tree")
    return kconf


def float_bounds(sym: kconfiglib.Symbol) -> tuple[float, float] | None:
    """(low, high) from "Allowed X to Y" in a string symbol's help, else None."""
    if sym.orig_type != kconfiglib.STRING:
        return None
    for node in sym.nodes:
        m = _ALLOWED.search(node.help or "")
        if m:
            return float(m.group(1)), float(m.group(2))
    return None


def parse_float(sym: kconfiglib.Symbol, text: str) -> float:
    """The float a float symbol holds, or ValueError saying what is allowed."""
    bounds = float_bounds(sym)
    assert bounds is not None, f"CONFIG_{sym.name} has no bounds: callers check float_bounds"
    low, high = bounds
    try:
        value = float(text)
    except ValueError:
        raise ValueError(
            f'CONFIG_{sym.name}="{clipped(text)}" is not a number; '
            f"allowed: a number from {low:g} to {high:g}"
        ) from None
    if not math.isfinite(value) or not low <= value <= high:
        raise ValueError(
            f'CONFIG_{sym.name}="{clipped(text)}" is out of range; allowed: {low:g} to {high:g}'
        )
    return value


def assignment_lines(text: str) -> dict[str, int]:
    """Symbol name -> line of its last assignment in a .config-style text."""
    lines: dict[str, int] = {}
    for no, line in enumerate(text.splitlines(), 1):
        m = _ASSIGN.match(line)
        if m:
            lines[m.group(1) or m.group(2)] = no
    return lines


def asked_in_file(
    kconf: kconfiglib.Kconfig, text: str, shown: str, where: dict[str, str] | None = None
) -> dict[str, Asked]:
    """What a loaded file asked for, symbol by symbol, with file:line (or, for
    a translated file, `where` each value came from)."""
    lines = assignment_lines(text)
    asked = {}
    for sym in kconf.unique_defined_syms:
        if sym.user_value is None or sym.name not in lines:
            continue
        value = sym.user_value
        if sym.orig_type in (kconfiglib.BOOL, kconfiglib.TRISTATE):
            value = kconfiglib.TRI_TO_STR[value]
        place = where[sym.name] if where else f"{shown}:{lines[sym.name]}"
        asked[sym.name] = Asked(str(value), place)
    return asked


def shown_path(path: Path) -> str:
    """A path as messages show it: relative to the project root when inside it."""
    path = Path(path).resolve()
    return str(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path)


def read_config_text(path: Path) -> str:
    """A .config-style file's text, or ConfigError naming the line of a byte
    that is not UTF-8. utf-8-sig: a byte-order mark (editors on Windows add
    one) is not a malformed line."""
    data = Path(path).read_bytes()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise _not_utf8(path, data, err.start) from None


def _not_utf8(path: Path, data: bytes, start: int) -> ConfigError:
    line = data.count(b"\n", 0, start) + 1
    column = start - (data.rfind(b"\n", 0, start) + 1) + 1
    return ConfigError(
        [
            f"{shown_path(path)}:{line}: byte 0x{data[start]:02x} "
            f"(column {column}) is not UTF-8 text; retype that line in "
            f"plain text or fix it with `make menuconfig`"
        ],
        shown_path(path),
    )


def _as_error(warning: str) -> str:
    """kconfiglib's load warning as the error it is here (nothing is ignored)."""
    text = warning.replace("warning: ", "", 1).replace(" Assignment ignored.", "")
    m = re.search(r"ignoring malformed line '(.*)'$", text)
    if m:
        text = text[: m.start()] + (
            f"malformed line '{m.group(1)}': expected CONFIG_NAME=value, "
            f"'# CONFIG_NAME is not set', a comment or a blank line"
        )
    return text


def load_checked(
    path: Path, notes: list[str] | None = None, knlp: bool | None = None, text: str | None = None
) -> tuple[kconfiglib.Kconfig, list[str]]:
    """Load `path` (a .config or defconfig) as far as it goes: the tree and
    every problem, each naming the file and line (load_strict raises on them).

    Old and the original project's symbol names load as the current ones
    (lib/config/renames.py); kconfiglib reads the rewritten text, line for line.
    A file in knlp's format (or any file with knlp=True) loads as the
    experiment it is there (lib/config/knlp/); its report goes to `notes`.
    text: the file's text as the caller read it (load_setting), else read here."""
    shown = shown_path(path)
    if not Path(path).is_file():
        raise ConfigError([f"{shown}: no such file"])
    raw = read_config_text(path) if text is None else text
    kconf = open_tree()
    where, imported = None, None
    if knlp or (knlp is None and is_knlp(raw)):
        imported = translate(raw, shown, kconf, lambda name: suggest(name, kconf))
        text, problems, where = imported.text, imported.problems, imported.where
        if notes is not None:
            notes += imported.report
        if imported.missing:  # what follows from a missing feature would only be noise
            return kconf, problems
    else:
        text, problems = rewrite(raw, shown)
    with tempfile.TemporaryDirectory() as tmp:
        current = Path(tmp) / "config"
        current.write_text(text)
        kconf.load_config(str(current))
    problems += [_as_error(w.replace(str(current), shown)) for w in kconf.warnings]
    lines = assignment_lines(text)
    for name, value in kconf.missing_syms:
        near = suggest(name, kconf)
        problems.append(
            f"{shown}:{lines.get(name, '?')}: CONFIG_{name}={value}: unknown "
            f"symbol{f' (did you mean CONFIG_{near}?)' if near else ''}"
        )
    asked = asked_in_file(kconf, text, shown, where)
    if imported is not None:
        for name in sorted(imported.optional & asked.keys()):
            if not kconf.syms[name].visibility:
                if notes is not None:
                    notes.append(
                        f"{asked[name].where}: CONFIG_{name} left out: it "
                        f"{_unmet(kconf.syms[name].direct_dep)}"
                    )
                del asked[name]
    problems += check_asked(kconf, asked) + check_floats(kconf, asked)
    return kconf, problems


def load_setting(path: Path, name: str) -> tuple[str, list[str]]:
    """One symbol's value as `make` loads `path`, and the problems `make` finds on
    the lines that set it (under any of its names), each naming file and line:
    for commands that need one setting of .config and must not stop at a problem
    elsewhere in it. A byte that is not UTF-8 on such a line raises make's
    ConfigError for it; a line elsewhere that is not UTF-8 is read as blank."""
    raw = _setting_text(path, name)
    kconf, problems = load_checked(path, text=raw)
    shown = shown_path(path)
    own = _setting_lines(raw, name)
    at = re.compile(rf"^{re.escape(shown)}:(\d+): ")
    mine = [p for p in problems if (m := at.match(p)) and int(m.group(1)) in own]
    return kconf.syms[name].str_value, mine


def _setting_text(path: Path, name: str) -> str:
    """read_config_text for load_setting: each line that is not UTF-8 is `make`'s
    error where it sets `name`, a blank line elsewhere (numbering kept)."""
    data = Path(path).read_bytes()
    lines, at = [], 0
    for no, line in enumerate(data.split(b"\n"), 1):
        try:
            lines.append(line.decode("utf-8-sig" if no == 1 else "utf-8"))
        except UnicodeDecodeError as err:
            if _setting_lines(line.decode("utf-8", "replace"), name):
                raise _not_utf8(path, data, at + err.start) from None
            lines.append("")
        at += len(line) + 1
    return "\n".join(lines)


def _setting_lines(text: str, name: str) -> set[int]:
    """The lines whose first word is CONFIG_<name> (or an old name of it), set,
    unset, spaced or malformed: those `make` would take that setting from."""
    first = re.compile(r"^\s*(?:#\s*)?CONFIG_(\w+)")
    return {
        no
        for no, line in enumerate(text.splitlines(), 1)
        if (m := first.match(line)) and current_name(m.group(1)) == name
    }


def load_strict(path: Path) -> kconfiglib.Kconfig:
    """Load `path` and raise ConfigError listing every problem (load_checked)."""
    kconf, problems = load_checked(path)
    if problems:
        raise ConfigError(problems, shown_path(path))
    return kconf


def check_asked(kconf: kconfiglib.Kconfig, asked: dict[str, Asked]) -> list[str]:
    """Every asked value must be the value the symbol now has."""
    problems = []
    for name, want in asked.items():
        sym = kconf.syms[name]
        if _same(sym, want.value):
            continue
        problems.append(
            f"{want.where}: CONFIG_{name}={clipped(want.value)} was not applied "
            f"({_kept(sym, want)}): {_why(kconf, sym, want.value)}"
        )
    return problems


def check_floats(kconf: kconfiglib.Kconfig, asked: dict[str, Asked]) -> list[str]:
    """Every active float symbol must parse and lie within its bounds."""
    problems = []
    for sym in kconf.unique_defined_syms:
        if float_bounds(sym) and sym.config_string:
            try:
                parse_float(sym, sym.str_value)
            except ValueError as err:
                where = asked.get(sym.name)
                problems.append(f"{where.where}: {err}" if where else str(err))
    return problems


def _same(sym: kconfiglib.Symbol, value: str) -> bool:
    if sym.orig_type in (kconfiglib.BOOL, kconfiglib.TRISTATE):
        return kconfiglib.TRI_TO_STR[sym.tri_value] == value
    if sym.orig_type in (kconfiglib.INT, kconfiglib.HEX):
        # Kconfig's own syntax only: Python's int() (so kconfiglib) also takes
        # " 5", "+5", "5_0" and non-ASCII digits ("٣").
        if not re.fullmatch(_INT_SYNTAX[sym.orig_type], value):
            return False
        try:
            base = 16 if sym.orig_type == kconfiglib.HEX else 10
            return sym.str_value != "" and int(value, base) == int(sym.str_value, base)
        except ValueError:
            return False
    return sym.str_value == value


def _kept(sym: kconfiglib.Symbol, want: Asked) -> str:
    """What the symbol is instead: an override refused leaves the configuration's value
    (kconfiglib itself would fall back to the Kconfig default, which nothing runs)."""
    if want.before is None and sym.str_value == want.value:  # taken by kconfiglib, not _same
        return "Kconfig's own tools refuse it"
    return f"it would be {want.before if want.before is not None else shown_value(sym)}"


def clipped(text: str) -> str:
    """A value as an error message echoes it: a pasted 5,000-character value would
    bury the message, so past SHOWN_CHARS it is cut and its length given."""
    if len(text) <= SHOWN_CHARS:
        return text
    return f"{text[:SHOWN_CHARS]}… ({len(text):,} characters)"


def shown_value(sym: kconfiglib.Symbol) -> str:
    """A symbol's value as messages show it: quoted strings, "unset"."""
    if not sym.config_string:
        return "unset"
    return sym.str_value if sym.orig_type != kconfiglib.STRING else f'"{sym.str_value}"'


def _why(kconf: kconfiglib.Kconfig, sym: kconfiglib.Symbol, value: str) -> str:
    """Explain, in the user's terms, why a value could not be applied."""
    if not any(node.prompt for node in sym.nodes):
        defaults = "; ".join(
            f"{kconfiglib.expr_str(v)} if {kconfiglib.expr_str(c)}" for v, c in sym.defaults
        )
        return f"it has no prompt and is derived from other options ({defaults}); set those instead"
    if sym.visibility == 0:
        if sym.choice is not None and sym.choice.visibility == 0:
            return f"its choice {sym.choice.name} {_unmet(sym.choice.direct_dep)}"
        return _unmet(sym.direct_dep)
    if sym.choice is not None:
        chosen = sym.choice.selection
        members = ", ".join(s.name for s in sym.choice.syms)
        return (
            f"exactly one of {members} can be y; {chosen.name if chosen else 'none'} "
            f"is selected (set the one you want to y and no other)"
        )
    if sym.orig_type in (kconfiglib.INT, kconfiglib.HEX):
        active = [
            f"{kconfiglib.expr_str(lo)} to {kconfiglib.expr_str(hi)}"
            for lo, hi, cond in sym.ranges
            if kconfiglib.expr_value(cond)
        ]
        if not re.fullmatch(_INT_SYNTAX[sym.orig_type], value):
            return f"not an integer; allowed: {' or '.join(active) or 'any integer'}"
        return f"out of range; allowed: {' or '.join(active)}"
    return "rejected by kconfiglib"


def _unmet(dep) -> str:
    """'depends on A && !B, which is not met (A=n, B=y)', without the <choice>
    term that every choice member carries."""
    text = re.sub(r"\s*&&\s*<choice \w+>|<choice \w+>\s*&&\s*", "", kconfiglib.expr_str(dep))
    syms = [
        s
        for s in kconfiglib.expr_items(dep)
        if isinstance(s, kconfiglib.Symbol) and not s.is_constant
    ]
    state = ", ".join(f"{s.name}={s.str_value or 'n'}" for s in syms)
    # A hidden derived symbol means nothing to a user: say what sets it.
    derived = [
        f"{s.name} is y if " + " or ".join(kconfiglib.expr_str(c) for _, c in s.defaults)
        for s in syms
        if s.defaults and not any(n.prompt for n in s.nodes)
    ]
    return f"depends on {text}, which is not met ({state})" + "".join(f"; {d}" for d in derived)


def closest_name(name: str, names: Iterable[str]) -> str | None:
    """The known name a misspelt one most likely meant, if any is close.

    A knlp name points to the symbol that holds its setting here. The
    matrix-only *_ENABLE_* symbols are suggested only for a name that has
    ENABLE in it (OPTIMIZER_SELECT_X means OPTIMIZER_X, not OPTIMIZER_ENABLE_X)."""
    names = list(names)
    if name in RENAMED:
        return RENAMED[name]
    row = KNLP_ROWS.get(name)
    if row is not None and (row.ours or row.values):
        return row.ours or row.values[0][1]
    if "ENABLE" not in name:
        names = [n for n in names if "_ENABLE_" not in n]
    near = difflib.get_close_matches(name, names, n=1)
    return near[0] if near else None


def suggest(name: str, kconf: kconfiglib.Kconfig) -> str | None:
    """closest_name among the tree's symbols and choices."""
    return closest_name(name, [*kconf.named_choices, *(s.name for s in kconf.unique_defined_syms)])


@dataclass(frozen=True)
class Numeric:
    """A numeric symbol's type and allowed range (an int's `range`, a float's
    "Allowed X to Y"), for what searches over values (lib/tune/space.py)."""

    integer: bool
    hex: bool
    low: float
    high: float


def numeric_symbols() -> tuple[dict[str, Numeric], set[str], set[str]]:
    """(numeric symbols by name, every other symbol's name, the choices' names)."""
    kconf = open_tree()
    numeric: dict[str, Numeric] = {}
    other: set[str] = set()
    for sym in kconf.unique_defined_syms:
        if sym.orig_type in (kconfiglib.INT, kconfiglib.HEX):
            base = 16 if sym.orig_type == kconfiglib.HEX else 10
            bounds: list[tuple[float, float]] = [
                (int(lo.str_value, base), int(hi.str_value, base))
                for lo, hi, cond in sym.ranges
                if kconfiglib.expr_value(cond)
            ] or [(-math.inf, math.inf)]
            hexa = sym.orig_type == kconfiglib.HEX
            numeric[sym.name] = Numeric(True, hexa, *bounds[0])
        elif (floats := float_bounds(sym)) is not None:
            numeric[sym.name] = Numeric(False, False, *floats)
        else:
            other.add(sym.name)
    return numeric, other, set(kconf.named_choices)


def saved_settings(run_dirs: dict[str, Path]) -> dict[str, dict[str, str]]:
    """Per run, its config.txt as `make savedefconfig` writes it: {symbol: value}
    for the symbols whose value is not Kconfig's default (what a defconfig that
    reproduces the run holds). Old symbol names read as the current ones, as
    load_checked reads them; runs whose config.txt does not read are left out.
    One parse of the tree serves every run."""
    kconf = open_tree()
    settings: dict[str, dict[str, str]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        current, scratch = Path(tmp) / "config", Path(tmp) / "defconfig"
        for run_id, run_dir in run_dirs.items():
            path = run_dir / "config.txt"
            try:
                current.write_text(rewrite(read_config_text(path), shown_path(path))[0])
                kconf.load_config(str(current), replace=True)
            except (OSError, ConfigError, kconfiglib.KconfigError):
                continue
            kconf.write_min_config(str(scratch), header="")
            lines = scratch.read_text().splitlines()
            settings[run_id] = dict(
                line.removeprefix("CONFIG_").split("=", 1)
                for line in lines
                if line.startswith("CONFIG_")
            )
    return settings
