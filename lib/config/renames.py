"""Symbol names that still load: renamed symbols and the original project's names.

Configurations written for the original AdamWPrune/knlp project, and .config
files from earlier versions of this one, use names that are no longer Kconfig
symbols. Each such name maps to the one symbol that now holds the concept, so
those files load as written: a file or an override naming an old symbol sets
the new one. Two names for one symbol given different values are an error;
the same value twice is fine (the original project's baseline document sets
both CONFIG_GPT2_COMPILE and CONFIG_COMPILE_MODEL).

The rewrite keeps every line where it was, so messages still point to the
user's file:line. It also drops a trailing "# comment" after an unquoted
value (`CONFIG_GPT2_GRADIENT_ACCUMULATION=8  # keep batch 128`), which the
kernel's tools would reject but documents copied from the field contain.
"""

from __future__ import annotations

import re

# old name -> current symbol
RENAMED: dict[str, str] = {
    # one torch.compile switch for every family
    "GPT2_COMPILE": "COMPILE_MODEL",
    "HAMT_COMPILE": "COMPILE_MODEL",
    # one set of Adam hyper-parameters for AdamW, AdamWSPAM and AdamWPrune
    "ADAMW_BETA1": "ADAM_BETA1",
    "SPAM_BETA1": "ADAM_BETA1",
    "ADAMW_BETA2": "ADAM_BETA2",
    "SPAM_BETA2": "ADAM_BETA2",
    "ADAMW_EPS": "ADAM_EPSILON",
    "ADAMW_EPSILON": "ADAM_EPSILON",
    "SPAM_EPS": "ADAM_EPSILON",
    "SPAM_WEIGHT_DECAY": "WEIGHT_DECAY",
    "ADAMW_WEIGHT_DECAY": "WEIGHT_DECAY",
    "ADAM_WEIGHT_DECAY": "WEIGHT_DECAY",
    # two reciprocal-attention forms: the old "RA" is the logit form
    "GPT2_ATTENTION_RA": "GPT2_ATTENTION_RA_LOGIT",
    "GPT2_ATTENTION_ENABLE_RA": "GPT2_ATTENTION_ENABLE_RA_LOGIT",
    # the original project's (knlp gpt2/Kconfig) names for the gated form and its control
    "GPT2_KNLP_RA": "GPT2_ATTENTION_RA_GATED",
    "GPT2_KNLP_SDPA_GATE": "GPT2_ATTENTION_SDPA_GATE",
    "GPT2_KNLP_RA_LAYERS": "GPT2_RA_GATED_LAYERS",
    "GPT2_KNLP_RA_HEADS": "GPT2_RA_GATED_HEADS",
    # knlp's names for the same settings (a whole knlp file goes through lib/config/knlp/)
    "GPT2_LOG_INTERVAL": "TRAIN_LOG_INTERVAL",
    "GPT2_MAX_TIME": "TRAIN_MAX_TIME",
    "GPT2_EVAL_SAMPLES": "TRAIN_EVAL_ITERS",
    "GPT2_WEIGHT_TYING": "GPT2_TIE_HEAD",
    "GPT2_TF32_ALLOWED": "TF32",
}

_SET = re.compile(r"^(\s*)CONFIG_(\w+)=(.*)$")
_SPACED = re.compile(r"^\s*CONFIG_(\w+)\s*=\s*(.*?)\s*$")
_UNSET = re.compile(r"^(\s*)#\s*CONFIG_(\w+) is not set\s*$")
_TRAILING_COMMENT = re.compile(r"^([^\"#]*?)\s+#.*$")


def current_name(name: str) -> str:
    """The symbol an old or current name stands for."""
    return RENAMED.get(name, name)


def _value(raw: str) -> str:
    """An assignment's value without a trailing comment after an unquoted value."""
    if raw.lstrip().startswith('"'):
        return raw
    m = _TRAILING_COMMENT.match(raw)
    return m.group(1) if m else raw


def _assignment(line: str) -> tuple[re.Match | None, re.Match | None, re.Match | None]:
    m, unset = _SET.match(line), _UNSET.match(line)
    spaced = None if m or unset else _SPACED.match(line)
    return m, unset, spaced


def _spaced_problem(where: str, spaced: re.Match) -> str:
    name, value = spaced.group(1), spaced.group(2)
    return (
        f"{where}: '{spaced.group(0).strip()}' has spaces around '=': write "
        f"CONFIG_{name}={value} (no spaces), as .config files do"
    )


def parse_lines(text: str, shown: str = "") -> tuple[list[tuple[int, str, str]], list[str]]:
    """(line, name, value) of each assignment, as written (no renaming), and the
    problems: spaces around '=', one name given two different values. The same
    value twice is kept once."""
    out: list[tuple[int, str, str]] = []
    seen: dict[str, tuple[str, int]] = {}
    problems: list[str] = []
    for no, line in enumerate(text.splitlines(), 1):
        m, unset, spaced = _assignment(line)
        if spaced is not None:
            problems.append(_spaced_problem(f"{shown}:{no}", spaced))
            continue
        found = m or unset
        if found is None:
            continue
        name = found.group(2)
        value = _value(m.group(3)).strip() if m else "n"
        if name in seen:
            if seen[name][0] != value:
                problems.append(
                    f"{shown}:{no}: CONFIG_{name}={value} contradicts "
                    f"CONFIG_{name}={seen[name][0]} on line {seen[name][1]}; keep one"
                )
            continue
        seen[name] = (value, no)
        out.append((no, name, value))
    return out, problems


def rewrite(text: str, shown: str) -> tuple[str, list[str]]:
    """Rewrite a .config-style text to current names, line for line.

    Returns the new text and the problems found (spaces around '=', and
    conflicting values for one symbol, under one name or two), each as
    "file:line: ...". A repeated assignment of the same value is dropped.
    """
    out: list[str] = []
    seen: dict[str, tuple[str, int, str]] = {}  # symbol -> (value, line, name used)
    problems: list[str] = []
    for no, line in enumerate(text.splitlines(), 1):
        m, unset, spaced = _assignment(line)
        if spaced is not None:
            problems.append(_spaced_problem(f"{shown}:{no}", spaced))
            out.append("")
            continue
        found = m or unset
        if found is None:
            out.append(line)
            continue
        indent, name = found.group(1), found.group(2)
        value = _value(m.group(3)) if m else "n"
        new = current_name(name)
        earlier = seen.get(new)
        if earlier is not None:
            # one symbol twice (under one name or two): agree, or say which lines disagree
            if earlier[0] != value:
                both = f"both set CONFIG_{new}; keep one" if earlier[2] != name else "keep one"
                problems.append(
                    f"{shown}:{no}: CONFIG_{name}={value} contradicts "
                    f"CONFIG_{earlier[2]}={earlier[0]} on line {earlier[1]}: {both}"
                )
            if earlier[0] == value or earlier[2] != name:
                out.append("")
                continue
            out[earlier[1] - 1] = ""  # the later value is checked too, as kconfig keeps it
        seen[new] = (value, no, name)
        out.append(f"{indent}CONFIG_{new}={value}" if m else f"{indent}# CONFIG_{new} is not set")
    return "\n".join(out) + "\n", problems
