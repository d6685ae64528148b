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
    "ADAMW_BETA1": "ADAM_BETA1", "SPAM_BETA1": "ADAM_BETA1",
    "ADAMW_BETA2": "ADAM_BETA2", "SPAM_BETA2": "ADAM_BETA2",
    "ADAMW_EPS": "ADAM_EPSILON", "ADAMW_EPSILON": "ADAM_EPSILON", "SPAM_EPS": "ADAM_EPSILON",
    "SPAM_WEIGHT_DECAY": "WEIGHT_DECAY", "ADAMW_WEIGHT_DECAY": "WEIGHT_DECAY",
    "ADAM_WEIGHT_DECAY": "WEIGHT_DECAY",
    # two reciprocal-attention forms: the old "RA" is the logit form
    "GPT2_ATTENTION_RA": "GPT2_ATTENTION_RA_LOGIT",
    "GPT2_ATTENTION_ENABLE_RA": "GPT2_ATTENTION_ENABLE_RA_LOGIT",
    # the original project's (knlp gpt2/Kconfig) names for the gated form and its control
    "GPT2_KNLP_RA": "GPT2_ATTENTION_RA_GATED", "GPT2_KNLP_SDPA_GATE": "GPT2_ATTENTION_SDPA_GATE",
    "GPT2_KNLP_RA_LAYERS": "GPT2_RA_GATED_LAYERS", "GPT2_KNLP_RA_HEADS": "GPT2_RA_GATED_HEADS",
}

_SET = re.compile(r"^(\s*)CONFIG_(\w+)=(.*)$")
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


def rewrite(text: str, shown: str) -> tuple[str, list[str]]:
    """Rewrite a .config-style text to current names, line for line.

    Returns the new text and the problems found (conflicting values for one
    symbol under two names), each as "file:line: ...".
    """
    out: list[str] = []
    seen: dict[str, tuple[str, int, str]] = {}  # symbol -> (value, line, name used)
    problems: list[str] = []
    for no, line in enumerate(text.splitlines(), 1):
        m, unset = _SET.match(line), _UNSET.match(line)
        found = m or unset
        if found is None:
            out.append(line)
            continue
        indent, name = found.group(1), found.group(2)
        value = _value(m.group(3)) if m else "n"
        new = current_name(name)
        earlier = seen.get(new)
        if earlier is not None and earlier[2] != name:
            # two names for one symbol: agree, or say which lines disagree
            if earlier[0] != value:
                problems.append(f"{shown}:{no}: CONFIG_{name}={value} contradicts "
                                f"CONFIG_{earlier[2]}={earlier[0]} on line {earlier[1]}: "
                                f"both set CONFIG_{new}; keep one")
            out.append("")
            continue
        seen[new] = (value, no, name)
        out.append(f"{indent}CONFIG_{new}={value}" if m else f"{indent}# CONFIG_{new} is not set")
    return "\n".join(out) + "\n", problems
