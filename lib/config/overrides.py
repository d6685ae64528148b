"""Command-line overrides: `make MAX_ITERS=50 DEVICE=cpu` and `SET="SYMBOL=value"`.

An override names a short alias (the table below) or any Kconfig symbol by its
name without CONFIG_. It is applied to the loaded configuration in memory, then
checked exactly like a value from a file; the user's .config is never edited.
Flags (DRY_RUN, YES, RESUME) steer the command and are not configuration.
Every message names the override as typed, its value cut past 40 characters
(kconfig.clipped): one pasted by mistake must not bury the error.
"""

from __future__ import annotations

import kconfiglib

from lib.config.kconfig import Asked, clipped, closest_name, shown_value
from lib.config.renames import current_name

# Short names researchers type on the make command line -> Kconfig symbol.
ALIASES = {
    "MAX_ITERS": "GPT2_MAX_ITERS",
    "TIME": "TRAIN_MAX_TIME",
    "BATCH_SIZE": "BATCH_SIZE",
    "GRAD_ACCUM": "GPT2_GRADIENT_ACCUMULATION",
    "COMPILE": "COMPILE_MODEL",
    "DEVICE": "DEVICE",
    "LR": "LEARNING_RATE",
    "WARMUP": "GPT2_WARMUP_STEPS",
    "SEED": "TRAIN_SEED",
    "RUN_NAME": "RUN_NAME",
    "PARALLEL_JOBS": "MATRIX_PARALLEL_JOBS",
    "EXECUTOR": "MATRIX_EXECUTOR",
    "SEEDS": "MATRIX_SEEDS",
    "RUNS_PER_GPU": "MATRIX_RUNS_PER_GPU",
    "REUSE": "MATRIX_REUSE",
    "TUNE_TRIALS": "MATRIX_TUNE_TRIALS",
    "TUNE_FRACTION": "MATRIX_TUNE_FRACTION",
    "TUNE_METRIC": "MATRIX_TUNE_METRIC",  # a choice: TUNE_METRIC=val_loss_per_char
}
FLAGS = ("DRY_RUN", "YES", "RESUME", "RETRY_FAILED")
# TRACKER=tensorboard,wandb,trackio switches the named trackers on and the others off.
TRACKERS = {
    "tensorboard": "TRACKER_TENSORBOARD",
    "wandb": "TRACKER_WANDB",
    "trackio": "TRACKER_TRACKIO",
}
_TRUE, _FALSE = ("1", "y", "yes"), ("0", "n", "no", "")


def split_args(args: list[str]) -> tuple[list[tuple[str, str]], dict[str, bool], list[str]]:
    """NAME=VALUE words -> (overrides in order, flags, problems)."""
    overrides, flags, problems = [], {f: False for f in FLAGS}, []
    for arg in args:
        name, sep, value = arg.partition("=")
        if not sep or not name:
            problems.append(f"override '{clipped(arg)}' is not NAME=VALUE")
        elif name in FLAGS:
            if value.lower() not in _TRUE + _FALSE:
                problems.append(f"override {name}={clipped(value)}: allowed 1 or 0")
            flags[name] = value.lower() in _TRUE
        elif name == "TRACKER":
            overrides += _tracker_overrides(value, problems)
        elif name == "TUNE":  # TUNE="LR WARMUP": tuning on, those symbols; TUNE= (or n) off
            off = value.strip().lower() in _FALSE
            overrides += [("MATRIX_TUNE", "n" if off else "y")]
            overrides += [] if off else [("MATRIX_TUNE_SYMBOLS", value)]
        elif name == "SET":
            more, more_flags, bad = split_args(value.split())
            overrides += more
            problems += [
                f"{b} (SET= splits at blanks: write a value without them, e.g. "
                f"betas=(0.9,0.99), or set it in .config with make menuconfig)"
                for b in bad
            ]
            flags.update({k: True for k, v in more_flags.items() if v})
        else:
            overrides.append((name, value))
    return overrides, flags, problems


def _tracker_overrides(value: str, problems: list[str]) -> list[tuple[str, str]]:
    """TRACKER=a,b -> each tracker symbol set to y or n; "none" (or "") turns all off.
    TRACKER is no Kconfig symbol, so a bad value is the make command line's, not .config's."""
    wanted = {n.strip().lower() for n in value.split(",") if n.strip()} - {"none"}
    unknown = sorted(wanted - set(TRACKERS))
    if unknown:
        problems.append(
            f"override TRACKER={clipped(value)} (make command line): unknown tracker "
            f"{clipped(', '.join(unknown))}; allowed {', '.join(TRACKERS)} or none, "
            f"comma-separated, e.g. `make TRACKER=tensorboard,wandb`"
        )
        return []
    return [(symbol, "y" if name in wanted else "n") for name, symbol in TRACKERS.items()]


def apply_overrides(
    kconf: kconfiglib.Kconfig, overrides: list[tuple[str, str]]
) -> tuple[dict[str, Asked], list[str]]:
    """Set each override on kconf; return what was asked (to check) and problems."""
    asked: dict[str, Asked] = {}
    problems: list[str] = []
    for name, value in overrides:
        where = f"override {clipped(name)}={clipped(value)}"
        target = ALIASES.get(name, current_name(name.removeprefix("CONFIG_")))
        if target in kconf.named_choices:
            member = _choice_member(kconf.named_choices[target], value, where, problems)
            if member is not None:
                member.set_value(2)
                asked[member.name] = Asked("y", where)
            continue
        sym = kconf.syms.get(target)
        if sym is None or not sym.nodes:
            problems.append(_unknown(kconf, name, where))
            continue
        if sym.orig_type == kconfiglib.BOOL and value not in ("y", "n"):
            problems.append(f"{where}: CONFIG_{sym.name} is a bool; allowed y or n")
            continue
        before = shown_value(sym)
        sym.set_value(value)
        asked[sym.name] = Asked(value, where, before)
    return asked, problems


def _unknown(kconf: kconfiglib.Kconfig, name: str, where: str) -> str:
    """An unknown override name, with the alias, choice or symbol it most likely meant."""
    names = [
        *ALIASES,
        *FLAGS,
        "TRACKER",
        "TUNE",
        "SCALE_ITERS",  # lib/config/lengths.py
        *kconf.named_choices,
        *(s.name for s in kconf.unique_defined_syms),
    ]
    near = closest_name(name.removeprefix("CONFIG_"), names)
    return (
        f"{where}: unknown name{f' (did you mean {near}?)' if near else ''}; use one of "
        f'{", ".join(sorted(ALIASES))} or a Kconfig symbol name (SET="SYMBOL=value")'
    )


def unknown_make_variables(
    names: list[str], make_names: list[str], kconf: kconfiglib.Kconfig
) -> str:
    """One paragraph for variables typed after `make` that the Makefile does not read.

    make would export them and carry on, so a misspelt override (LRR=1e-3) would
    train at the default value without a word."""
    symbols = [*kconf.named_choices, *(s.name for s in kconf.unique_defined_syms)]
    parts = []
    for name in names:
        bare = current_name(name.removeprefix("CONFIG_"))
        if bare in symbols and bare not in make_names:
            parts.append(f'{name} is a Kconfig symbol, not a make variable: SET="{bare}=<value>"')
            continue
        near = closest_name(bare, make_names)
        if near is None:
            symbol = closest_name(bare, symbols)
            near = f'SET="{symbol}=<value>"' if symbol else None
        parts.append(
            f"{name} is not a variable make reads{f' (did you mean {near}?)' if near else ''}"
        )
    return (
        f"{'; '.join(parts)}. make reads its own variables only (`make help` lists them) "
        'and any Kconfig symbol as SET="SYMBOL=value"; an environment variable meant for '
        "a program goes before make: `NAME=<value> make ...`"
    )


def _choice_member(
    choice: kconfiglib.Choice, value: str, where: str, problems: list[str]
) -> kconfiglib.Symbol | None:
    prefix = choice.name + "_"
    allowed = {s.name[len(prefix) :].lower(): s for s in choice.syms}
    member = allowed.get(value.lower())
    if member is None:
        problems.append(f"{where}: allowed values for {choice.name} are {', '.join(allowed)}")
    return member
