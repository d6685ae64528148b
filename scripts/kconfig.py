"""Configuration commands behind `make defconfig-*`, menuconfig, olddefconfig...

Each command validates strictly (lib/config/kconfig.py) and writes .config and
config.py only when the whole configuration is valid.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lib.cli import run_script  # noqa: E402
from lib.config import menu  # noqa: E402
from lib.config.generate import render_symbols  # noqa: E402
from lib.config.kconfig import ConfigError, load_strict, open_tree  # noqa: E402
from lib.config.run_config import load_run_config, write_outputs  # noqa: E402
from lib.paths import DEFCONFIGS, DOT_CONFIG as CONFIG, ROOT, SYMBOLS_PY  # noqa: E402
from lib.run.atomic import write_text_atomic  # noqa: E402


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
    write_outputs(load_strict(path))
    print(f"wrote .config and config.py from defconfigs/{name}")


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
    write_outputs(load_strict(CONFIG))
    print("config.py regenerated from .config")


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("command", choices=["defconfig", "list", "menuconfig", "olddefconfig",
                                            "alldefconfig", "savedefconfig", "genconfig",
                                            "show", "schema"])
    parser.add_argument("args", nargs="*", help="defconfig name, or NAME=VALUE overrides")
    opts = parser.parse_args(argv)
    if opts.command == "defconfig":
        defconfig(opts.args[0])
    elif opts.command == "list":
        list_defconfigs()
    elif opts.command == "menuconfig":
        menuconfig()
    elif opts.command in ("olddefconfig", "genconfig"):
        write_outputs(load_strict(CONFIG))
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
