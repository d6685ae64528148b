"""`make menuconfig` that keeps the strict loader's promise.

kconfiglib's curses menu (its menuconfig.py) refuses an int or hex entry
outside the symbol's range, but takes any text for a string symbol and saves
whatever the menu holds. Our floats are string symbols whose help says
"Allowed X to Y" (lib/config/kconfig.py), so unaided the menu would take "abc" as a
learning rate and write it to .config, which nothing could then load.

menuconfig.py has no hooks, but it looks its helper functions up by module
name at every call, so replacing a few of them on the module is enough:

- _check_valid: a float entry must parse and lie within its bounds; otherwise
  the menu's error dialog says why and the value stays as it was.
- _range_info: a float's entry dialog shows its allowed range.
- _try_save: a save first writes a scratch copy and loads it strictly (and
  checks the cross-symbol rules); on any problem a dialog lists them and the
  target file is left as it was.
- _load_config: the menu starts from the configuration loaded here, strictly
  when it is valid and otherwise as far as it goes, with its problems shown in
  a dialog, so an invalid .config is repaired in the menu, not in an editor.
- _draw_jump_to_dialog: where the '/' search for a name finds nothing, its
  "No matches" line names the symbol the text most likely meant (a misspelling,
  an old or knlp name), as the loaders do. The search itself is kconfiglib's.
"""

from __future__ import annotations

import re
import tempfile
import textwrap
from pathlib import Path
from typing import Any

import kconfiglib

from lib.config.kconfig import (
    ConfigError,
    float_bounds,
    load_checked,
    load_strict,
    open_tree,
    parse_float,
    suggest,
)
from lib.config.renames import rewrite
from lib.config.run_config import check_rules, rules_beside, typed_values

FIX_HINT = "Press / and type a symbol's name to jump to it."

# kconfiglib's menuconfig module: untyped, and install() reads and replaces
# its private functions, which no module type could declare
Menuconfig = Any


def problems_in(path: Path) -> list[str]:
    """Everything that keeps `path` from being written as the configuration."""
    try:
        kconf, problems = load_checked(path)
    except ConfigError as err:
        return err.problems
    return problems + rules_beside(kconf, problems)


def load_for_menu(path: Path) -> tuple[kconfiglib.Kconfig, list[str]]:
    """The tree with `path` loaded as far as it goes, and what is wrong with it.

    A valid file loads strictly. An invalid one loads the way kconfiglib reads
    it (old symbol names still mapped to current ones), so the menu can open
    on it and show the user the problems to fix."""
    if not path.is_file():
        return open_tree(), []
    try:
        kconf = load_strict(path)
    except ConfigError as err:
        problems = err.problems
    else:
        return kconf, check_rules(typed_values(kconf))
    kconf = open_tree()
    # a byte that is not UTF-8 is among the problems shown; the menu opens anyway
    text, _ = rewrite(path.read_bytes().decode("utf-8-sig", errors="replace"), path.name)
    with tempfile.TemporaryDirectory() as tmp:
        current = Path(tmp) / "config"
        current.write_text(text)
        kconf.load_config(str(current))
    return kconf, problems


def no_match_text(search: str, kconf: kconfiglib.Kconfig) -> str:
    """The jump-to dialog's line when `search` matches nothing: with the symbol a
    typed name most likely meant (one word that could be a name; a regex gets none)."""
    word = search.strip().upper().removeprefix("CONFIG_")
    near = suggest(word, kconf) if re.fullmatch(r"[A-Z0-9_]+", word) else None
    return (
        f"No matches. Did you mean {near}? Type its name to jump to it." if near else "No matches"
    )


def _dialog_text(head: str, problems: list[str], width: int) -> str:
    """Problems as dialog lines no wider than `width` (dialogs do not wrap)."""
    width = max(width, 40)
    lines = [head, ""]
    for problem in problems:
        lines += textwrap.wrap(problem, width, initial_indent="- ", subsequent_indent="  ")
    return "\n".join(lines + ["", *textwrap.wrap(FIX_HINT, width)])


def install(mc: Menuconfig, problems_at_open: list[str], shown: str) -> None:
    """Replace menuconfig.py's checks on module `mc` (see the module docstring)."""
    check_valid, range_info, try_save = mc._check_valid, mc._range_info, mc._try_save
    init, draw_jump_to = mc._init, mc._draw_jump_to_dialog

    def width() -> int:
        return mc._stdscr.getmaxyx()[1] - 8

    def float_check_valid(sym, text):
        if float_bounds(sym) is None:
            return check_valid(sym, text)
        try:
            parse_float(sym, text)
        except ValueError as err:
            mc._error(
                "\n".join(
                    textwrap.wrap(f'{err}. The value stays "{sym.str_value}".', max(width(), 40))
                )
            )
            return False
        return True

    def float_range_info(sym):
        bounds = float_bounds(sym)
        if bounds is None:
            return range_info(sym)
        return f"Range: {bounds[0]:g} to {bounds[1]:g} (a number, e.g. 3e-4 or 0.0003)"

    def checked_try_save(save_fn, filename, description):
        with tempfile.TemporaryDirectory() as tmp:
            scratch = Path(tmp).resolve() / Path(filename).name
            save_fn(str(scratch))
            # the scratch file's line numbers mean nothing to the user: drop them
            at_line = re.compile(re.escape(str(scratch)) + r"(:[0-9?]+)?: ")
            problems = [at_line.sub("", p) for p in problems_in(scratch)]
        if problems:
            mc._error(
                _dialog_text(f"Not saved: '{filename}' is left as it was.", problems, width())
            )
            return None
        return try_save(save_fn, filename, description)

    def load_config():
        # The tree passed to the menu is already loaded (load_for_menu). True
        # makes the menu offer to save on quit: always after fixing problems.
        if not Path(mc._conf_filename).exists():
            return True
        print(f"Loaded configuration '{shown}'")
        return bool(problems_at_open) or mc._needs_save()

    def init_then_show_problems():
        init()
        if problems_at_open:
            mc._msg(
                f"{shown} is invalid: fix it here, then save",
                _dialog_text(
                    f"The menu shows {shown} as kconfiglib reads it; saving needs these fixed:",
                    problems_at_open,
                    width(),
                ),
            )

    def draw_jump_to_with_suggestion(
        edit_box,
        matches_win,
        bot_sep_win,
        help_win,
        s,
        s_i,
        hscroll,
        bad_re,
        matches,
        sel_node_i,
        scroll,
    ):
        # draws bad_re (a regex error) where nothing matched, else "No matches"
        if not matches and not bad_re and s.strip():
            bad_re = no_match_text(s, mc._kconf)
        draw_jump_to(
            edit_box,
            matches_win,
            bot_sep_win,
            help_win,
            s,
            s_i,
            hscroll,
            bad_re,
            matches,
            sel_node_i,
            scroll,
        )

    mc._check_valid = float_check_valid
    mc._draw_jump_to_dialog = draw_jump_to_with_suggestion
    mc._range_info = float_range_info
    mc._try_save = checked_try_save
    mc._load_config = load_config
    mc._init = init_then_show_problems


def run(kconf: kconfiglib.Kconfig, problems_at_open: list[str], shown: str) -> None:
    """Open kconfiglib's menu on `kconf` (KCONFIG_CONFIG names the file it saves)."""
    import menuconfig as mc  # kconfiglib's curses front end; curses only when asked

    install(mc, problems_at_open, shown)
    mc.menuconfig(kconf)
