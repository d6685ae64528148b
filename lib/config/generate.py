"""The two Python files made from Kconfig, as the kernel makes its headers.

* lib/config/symbols.py, from the Kconfig tree (`make schema`): the frozen
  dataclass Symbols, one field per symbol with its Python type (bool, int,
  float for "Allowed X to Y" strings, str, the choices as Literal names), typed
  `X | None` where a dependency can hide it, and the prompt and help as the
  field's docstring. It is committed, so mypy and an editor know every symbol;
  tests/lib/config/test_schema.py fails when it lags behind the Kconfig files.
* config.py, from .config (every command that writes .config): the
  configuration's values as a RunConfig, with the SHA-256 of the .config it
  came from so a hand-edited .config is noticed (lib/config/run_config.py).
"""

from __future__ import annotations

import hashlib
import textwrap

import kconfiglib

from lib.config.kconfig import float_bounds

SYMBOLS_HEADER = '''"""Every Kconfig symbol as a typed field: generated from the Kconfig files by
`make schema` (lib/config/generate.py). Do not edit; change the Kconfig files.

A field is None when the symbol's dependencies hide it in a configuration;
symbols that nothing can hide are typed without None. A named choice appears
twice: as its own field holding the selected member's lower-cased suffix
(DEVICE = "cpu") and as one bool per member (DEVICE_CPU = True).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True, kw_only=True)
class Symbols:
'''


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


def render_symbols(kconf: kconfiglib.Kconfig) -> str:
    """lib/config/symbols.py's text: fields in Kconfig order, each named
    choice just before its members."""
    choice_of = {c.syms[0].name: (name, c) for name, c in kconf.named_choices.items() if c.syms}
    lines = [SYMBOLS_HEADER.rstrip("\n")]
    for sym in kconf.unique_defined_syms:
        if sym.name in choice_of:
            name, choice = choice_of[sym.name]
            default = "" if _always_active(choice.direct_dep) else " = None"
            lines += [
                f"    {name}: {choice_type(name, choice)}{default}",
                _doc(*_node_text(choice)),
                "",
            ]
        kind = symbol_type(sym)
        default = " = None" if kind.endswith("| None") else ""
        lines += [f"    {sym.name}: {kind}{default}", _doc(*_node_text(sym)), ""]
    return "\n".join(lines).rstrip("\n") + "\n"


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
