"""Configuration commands behind `make defconfig-*`, menuconfig, olddefconfig...

Each command validates strictly (lib/config/kconfig.py) and writes .config and
config.py only when the whole configuration is valid.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from lib.atomic import write_text_atomic
from lib.cli import run_script
from lib.config import menu
from lib.config.generate import render_symbols
from lib.config.kconfig import ConfigError, load_strict, open_tree
from lib.config.knlp import report as knlp_report
from lib.config.knlp.table import COMMIT as KNLP_COMMIT
from lib.config.overrides import unknown_make_variables
from lib.config.run_config import load_run_config, load_valid, typed_values, write_outputs
from lib.paths import DEFCONFIGS, ROOT, SYMBOLS_PY
from lib.paths import DOT_CONFIG as CONFIG


def describe(path: Path) -> str:
    """A defconfig's description: its first comment line."""
    for line in path.read_text().splitlines():
        if line.startswith("#") and "CONFIG_" not in line:
            return line.lstrip("# ").strip()
    return "(no description: add a '# ...' line at the top)"


def list_defconfigs() -> None:
    paths = sorted(p for p in DEFCONFIGS.iterdir() if p.is_file())
    width = max(len(p.name) for p in paths)
    for p in paths:
        print(f"  defconfig-{p.name:<{width}}  {describe(p)}")


def defconfig(name: str) -> None:
    path = DEFCONFIGS / name
    if not path.is_file():
        print(f"error: no defconfig named '{name}'. Available:", file=sys.stderr)
        list_defconfigs()
        raise SystemExit(2)
    notes: list[str] = []
    kconf = _reported(lambda: load_valid(path, notes), notes, path)
    write_outputs(kconf)
    print(f"wrote .config and config.py from defconfigs/{name}")


def _reported(load, notes: list[str], path: Path | None = None):
    """load(), with a knlp file's report printed whether it loads or not: when it
    loads, what it loads as comes first (lib/config/knlp/report.py)."""
    kconf = None
    try:
        kconf = load()
        return kconf
    finally:
        if notes:
            values = typed_values(kconf) if kconf is not None else None
            text = path.read_text(errors="replace") if path is not None else None
            print("\n".join(knlp_report.ordered(notes, text, values)))


def import_knlp(file: str, name: str | None) -> None:
    """A knlp-format file (lib/config/knlp/): with NAME, written as
    defconfigs/<NAME> in this project's names; without, loaded into .config."""
    path = Path(file)
    notes: list[str] = []
    kconf = _reported(lambda: load_valid(path, notes, knlp=True), notes, path)
    if name is None:
        write_outputs(kconf)
        print(f"wrote .config and config.py from {file} (knlp format)")
        return
    target = DEFCONFIGS / name
    if target.exists():
        raise ConfigError([f"defconfigs/{name} exists; choose another NAME= or remove it"])
    title = next(
        (
            line.lstrip("# ").strip()
            for line in path.read_text().splitlines()
            if line.startswith("#") and "CONFIG_" not in line
        ),
        name,
    )
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp) / name
        kconf.write_min_config(
            str(scratch),
            header=f"# {title}\n# Imported from knlp-format "
            f"{path.name} with knlp's defaults at {KNLP_COMMIT[:8]}\n",
        )
        write_text_atomic(target, scratch.read_text())
    print(f"wrote defconfigs/{name} (this project's names); load it with `make defconfig-{name}`")


def menuconfig() -> None:
    """Open the menu even on an invalid .config, so it is fixed there; the menu
    refuses bad floats and saves only a valid configuration (lib/config/menu.py)."""
    kconf, problems = menu.load_for_menu(CONFIG)
    if problems:
        print(f"{ConfigError(problems, '.config')}\nopening the menu to fix it", file=sys.stderr)
    os.chdir(ROOT)
    os.environ["KCONFIG_CONFIG"] = str(CONFIG)
    menu.run(kconf, problems, ".config")
    if not CONFIG.exists():
        print("no configuration saved")
        return
    write_outputs(load_valid(CONFIG))
    print("config.py regenerated from .config")


def _has_settings(path: Path) -> bool:
    """Whether a .config sets anything (an empty one loads as all defaults)."""
    try:
        lines = path.read_bytes().splitlines()
    except OSError:
        return True  # a missing file is load_valid's to report
    return any(line.lstrip().startswith((b"CONFIG_", b"# CONFIG_")) for line in lines)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "command",
        choices=[
            "defconfig",
            "list",
            "menuconfig",
            "olddefconfig",
            "alldefconfig",
            "savedefconfig",
            "genconfig",
            "show",
            "schema",
            "import-knlp",
            "make-vars",
        ],
    )
    parser.add_argument("args", nargs="*", help="defconfig name, or NAME=VALUE overrides")
    opts = parser.parse_args(argv)
    if opts.command == "defconfig":
        defconfig(opts.args[0])
    elif opts.command == "import-knlp":
        import_knlp(opts.args[0], opts.args[1] if len(opts.args) > 1 and opts.args[1] else None)
    elif opts.command == "make-vars":  # the Makefile's refusal of unknown variables
        known = os.environ.get("MAKE_KNOWN_VARS", "").split()
        print(unknown_make_variables(opts.args, known, open_tree()))
    elif opts.command == "list":
        list_defconfigs()
    elif opts.command == "menuconfig":
        menuconfig()
    elif opts.command in ("olddefconfig", "genconfig"):
        empty = not _has_settings(CONFIG)
        write_outputs(load_valid(CONFIG))
        if empty:
            print(
                "note: .config held no settings, so it now holds every option at its Kconfig "
                "default (`make show` prints them); to start from a named configuration "
                "instead: `make list-defconfigs`, then `make defconfig-<name>`",
                file=sys.stderr,
            )
    elif opts.command == "alldefconfig":
        write_outputs(open_tree())
        print("wrote .config and config.py with every option at its default")
    elif opts.command == "savedefconfig":
        load_strict(CONFIG).write_min_config(str(ROOT / "defconfig"))
        print("wrote defconfig (minimal; copy it to defconfigs/<name> to keep it)")
    elif opts.command == "schema":
        write_text_atomic(SYMBOLS_PY, render_symbols(open_tree()))
    elif opts.command == "show":
        run = load_run_config(opts.args)
        for name, value in run.values.items():
            print(f"CONFIG_{name} = {value!r}")
        print(run.describe())


if __name__ == "__main__":
    run_script(main)
