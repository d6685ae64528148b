"""Reading a real knlp checkout: its Kconfig tree, its commit, its GPT-2 defconfigs.

Used by the table generator (lib/config/knlp/table.py is written from it) and
by scripts/check_knlp.sh; nothing here runs when a file is imported.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import kconfiglib

from lib.config.knlp.names import DERIVED, ROWS

# Our-side symbols whose knlp namesake (same name) is part of the experiment.
SHARED_NAMES = (
    "GPT2_MODEL_124M",
    "GPT2_MODEL_350M",
    "GPT2_MODEL_774M",
    "GPT2_MODEL_1558M",
    "GPT2_DATASET_SHAKESPEARE",
    "GPT2_DATASET_FINEWEBEDU",
    "GPT2_DATASET_OPENWEBTEXT",
    "GPT2_DATASET_TINYSTORIES",
    "GPT2_DATASET_CUSTOM",
    "GPT2_BLOCK_SIZE",
    "BATCH_SIZE",
    "GPT2_GRADIENT_ACCUMULATION",
    "HYPER_PARAM_MANUAL",
    "LEARNING_RATE",
    "GPT2_MIN_LR",
    "GPT2_WARMUP_STEPS",
    "GPT2_MAX_ITERS",
    "GPT2_EVAL_INTERVAL",
    "GPT2_DROPOUT",
    "GPT2_BIAS",
    "MIXED_PRECISION",
    "COMPILE_MODEL",
    "PIN_MEMORY",
    "OPTIMIZER_MODE_SINGLE",
    "OPTIMIZER_MODE_MULTIPLE",
    "OPTIMIZER_ENABLE_ADAMW",
    "OPTIMIZER_ENABLE_ADAMWSPAM",
    "OPTIMIZER_ENABLE_ADAMWPRUNE",
    "SPAM_THETA",
    "SPAM_ENABLE_CLIP",
    "SPAM_INTERVAL",
    "SPAM_WARMUP_STEPS",
    "ADAMWPRUNE_BASE_ADAMW",
    "ADAMWPRUNE_BASE_ADAMWSPAM",
    "PRUNING_MODE_NONE",
    "PRUNING_MODE_SINGLE",
    "PRUNING_MODE_MULTIPLE",
    "PRUNING_WARMUP",
    "PRUNING_FREQUENCY",
    "PRUNING_ENABLE_NONE",
    "PRUNING_ENABLE_MAGNITUDE",
    "PRUNING_ENABLE_MOVEMENT",
    "PRUNING_ENABLE_STATE",
    "RA_MLA_LATENT_DIM",
    "RA_MLA_RA_WINDOW",
    "RA_MLA_RA_ALPHA",
    "RA_MLA_PER_HEAD_Q_LATENT",
    "RA_MLA_PER_HEAD_V_UP",
    "GPT2_KNLP_SDPA_GATE",
    "GPT2_KNLP_RA",
    "GPT2_USE_DDP",
    "LM_EVAL_TASKS",
    "LM_EVAL_LIMIT",
    "COMPILE_AUTO",
    "HYPER_PARAM_AUTO",
)


@contextlib.contextmanager
def in_dir(path: Path) -> Iterator[None]:
    cwd = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(cwd)


def open_knlp(root: Path) -> kconfiglib.Kconfig:
    """knlp's own Kconfig tree, parsed from its root as its Makefile does."""
    before = os.environ.get("srctree")
    os.environ["srctree"] = str(root)
    try:
        with in_dir(root):
            return kconfiglib.Kconfig("Kconfig", warn_to_stderr=False)
    finally:  # our own tree is parsed with srctree unset
        if before is None:
            del os.environ["srctree"]
        else:
            os.environ["srctree"] = before


def commit_of(root: Path) -> str:
    return subprocess.run(
        ["git", "-C", str(root), "rev-parse", "HEAD"], check=True, capture_output=True, text=True
    ).stdout.strip()


def gpt2_defconfigs(root: Path) -> list[Path]:
    """Every defconfig of the checkout that selects GPT-2."""
    found = []
    for folder in ("defconfigs", "gpt2/defconfigs", "gpt/defconfigs"):
        for path in sorted((root / folder).glob("*")):
            if path.is_file() and "CONFIG_MODEL_SELECT_GPT2=y" in path.read_text(errors="replace"):
                found.append(path)
    return found


def _closure(kconf: kconfiglib.Kconfig, seeds: set[str]) -> set[str]:
    """The seeds and every symbol their dependencies, defaults, selects and choices name."""
    todo, done = [kconf.syms[n] for n in seeds if n in kconf.syms and kconf.syms[n].nodes], set()
    while todo:
        sym = todo.pop()
        if sym.name in done:
            continue
        done.add(sym.name)
        exprs = [sym.direct_dep, sym.rev_dep] + [e for d in sym.defaults for e in d]
        if sym.choice is not None:
            exprs += [sym.choice.direct_dep] + [e for d in sym.choice.defaults for e in d]
            todo += sym.choice.syms
        for expr in exprs:
            todo += [
                s
                for s in kconfiglib.expr_items(expr)
                if isinstance(s, kconfiglib.Symbol) and not s.is_constant and s.nodes
            ]
    return done


def render_table(root: Path) -> str:
    """lib/config/knlp/table.py's text: knlp's GPT-2-relevant symbols at this commit."""
    kconf = open_knlp(root)
    names = _closure(kconf, set(ROWS) | set(SHARED_NAMES) | set(DERIVED))
    expr = kconfiglib.expr_str
    syms, choices, selects = [], {}, []
    for sym in kconf.unique_defined_syms:
        if sym.name not in names:
            continue
        if sym.rev_dep is not kconf.n:  # selected by others: OPTIMIZER_SUPPORTS_*
            selects.append(f"    {sym.name!r}: {expr(sym.rev_dep).replace(' && <choice>', '')!r},")
        prompt = any(node.prompt for node in sym.nodes)
        dep = expr(sym.direct_dep).replace(" && <choice>", "").replace("<choice>", "y")
        defaults = tuple((expr(v), expr(c)) for v, c in sym.defaults)
        choice = sym.choice
        if choice is not None:
            key = "+".join(s.name for s in choice.syms)
            choices[key] = (
                tuple(s.name for s in choice.syms),
                tuple((expr(v), expr(c)) for v, c in choice.defaults),
                expr(choice.direct_dep),
            )
        syms.append(
            f"    {sym.name!r}: ({kconfiglib.TYPE_TO_STR[sym.orig_type]!r}, {prompt}, "
            f"{dep!r}, {defaults!r}),"
        )
    head = (
        f'"""GENERATED by `scripts/check_knlp.sh --table <knlp checkout>` from knlp\'s\n'
        f"Kconfig tree at commit {commit_of(root)}: facts only (symbol, type,\n"
        f"has a prompt, depends on, defaults with their conditions; choices with\n"
        f'their members and default; what selects a symbol). Do not edit by hand."""\n'
        f"COMMIT = {commit_of(root)!r}\n\n"
    )
    body = "SYMBOLS = {\n" + "\n".join(syms) + "\n}\n\nCHOICES = (\n"
    body += "".join(f"    {c!r},\n" for c in choices.values()) + ")\n"
    body += "\nSELECTS = {\n" + "".join(f"{line}\n" for line in selects) + "}\n"
    return head + body
