"""The one reader of .config: kconfiglib -> validated, typed RunConfig.

Everything else receives a RunConfig (or the generated config.py); nothing
else parses CONFIG_ lines. Values are typed from Kconfig: bool, int, float
(string symbols with "Allowed X to Y" bounds) and str; a named choice such as
DEVICE also appears as the lower-cased name of its selected member ("cpu").
"""
from __future__ import annotations

import math
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import kconfiglib

from lib.atomic import write_text_atomic
from lib.kconfig import ROOT, ConfigError, check_asked, check_floats, float_bounds, load_strict
from lib.overrides import apply_overrides, split_args
from lib import registry
from lib.rules import check_optimizer, check_pruning

CONFIG = ROOT / ".config"
CONFIG_PY = ROOT / "config.py"


@dataclass(frozen=True)
class RunConfig:
    """Typed configuration of one run: symbol values plus command-line overrides."""
    values: dict[str, Any]
    overrides: dict[str, str] = field(default_factory=dict)
    flags: dict[str, bool] = field(default_factory=dict)
    config_text: str = ""  # the .config the run used, overrides applied

    def __getattr__(self, name: str) -> Any:
        values = self.__dict__.get("values", {})
        if name in values:
            return values[name]
        raise AttributeError(f"CONFIG_{name} is not set in this configuration "
                             f"(unknown, or its dependencies are not met)")

    def get(self, name: str, default: Any = None) -> Any:
        return self.values.get(name, default)

    def derived(self, world_size: int = 1) -> dict[str, int]:
        """Values computed from others; the only place they are computed. With
        HYPER_PARAM_AUTO the effective batch is TARGET_EFFECTIVE_BATCH, which the
        micro-batch and accumulation chosen at start multiply to exactly."""
        effective = self.BATCH_SIZE * self.GPT2_GRADIENT_ACCUMULATION * world_size
        if self.get("HYPER_PARAM") == "auto":
            effective = self.TARGET_EFFECTIVE_BATCH
        tokens = effective * self.GPT2_BLOCK_SIZE
        return {
            "world_size": world_size,
            "effective_batch_size": effective,
            "tokens_per_iter": tokens,
            "total_tokens": tokens * self.GPT2_MAX_ITERS,
            "evaluations": math.ceil(self.GPT2_MAX_ITERS / self.GPT2_EVAL_INTERVAL),
        }

    def describe(self, world_size: int = 1) -> str:
        d = self.derived(world_size)
        split = self.BATCH_SIZE * self.GPT2_GRADIENT_ACCUMULATION * world_size
        lines = [f"effective batch {d['effective_batch_size']} = batch {self.BATCH_SIZE} x "
                 f"accumulation {self.GPT2_GRADIENT_ACCUMULATION} x world {world_size}"
                 if split == d["effective_batch_size"] else
                 f"effective batch {d['effective_batch_size']} = TARGET_EFFECTIVE_BATCH "
                 f"(HYPER_PARAM_AUTO: micro-batch and accumulation are chosen at start)",
                 f"tokens/iter {d['tokens_per_iter']:,} = effective batch x block "
                 f"{self.GPT2_BLOCK_SIZE}; {d['total_tokens']:,} tokens over "
                 f"{self.GPT2_MAX_ITERS} iterations, {d['evaluations']} evaluations"]
        if self.overrides:
            lines.append("overrides: " + " ".join(f"{k}={v}" for k, v in self.overrides.items()))
        return "\n".join(lines)


def typed_values(kconf: kconfiglib.Kconfig) -> dict[str, Any]:
    """Active symbols (those .config writes) as Python values, in Kconfig order."""
    out: dict[str, Any] = {}
    for sym in kconf.unique_defined_syms:
        if not sym.config_string:
            continue
        if sym.orig_type in (kconfiglib.BOOL, kconfiglib.TRISTATE):
            out[sym.name] = sym.tri_value == 2
        elif sym.orig_type in (kconfiglib.INT, kconfiglib.HEX):
            out[sym.name] = int(sym.str_value, 16 if sym.orig_type == kconfiglib.HEX else 10)
        elif float_bounds(sym):
            out[sym.name] = float(sym.str_value)
        else:
            out[sym.name] = sym.str_value
    for name, choice in kconf.named_choices.items():
        if choice.selection is not None:
            out[name] = choice.selection.name[len(name) + 1:].lower()
    return out


def check_rules(values: dict[str, Any]) -> list[str]:
    """Rules across symbols that Kconfig cannot state, kept beside the code they
    protect: the family's config class (n_embd % n_head), the optimizer and
    pruning packages. Checked whenever a configuration is loaded or written."""
    run = RunConfig(values)
    problems = check_optimizer(run) + check_pruning(run)
    try:
        registry.family(run.MODEL).from_run_config(run, 50257)
    except ValueError as err:
        problems.append(str(err))
    return problems


def config_text(kconf: kconfiglib.Kconfig, header: str = "") -> str:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "config"
        kconf.write_config(str(path), header=header, save_old=False)
        return path.read_text()


def load_run_config(args: list[str] = (), path: Path = CONFIG) -> RunConfig:
    """Load .config, apply NAME=VALUE overrides, validate all, return RunConfig."""
    if not Path(path).is_file():
        raise ConfigError([f"{path} does not exist: start from a defconfig, e.g. "
                           f"`make defconfig-gpt2-tiny-shakespeare` (`make list-defconfigs` "
                           f"lists them)"])
    kconf = load_strict(path)
    overrides, flags, problems = split_args(list(args))
    asked, more = apply_overrides(kconf, overrides)
    problems += more + check_asked(kconf, asked) + check_floats(kconf, asked)
    if not problems:
        values = typed_values(kconf)
        problems += check_rules(values)
    if problems:
        raise ConfigError(problems, "command-line overrides" if overrides else str(path))
    applied = dict(overrides)
    header = "# Configuration this run used"
    header += (": .config with overrides " + " ".join(f"{k}={v}" for k, v in applied.items())
               if applied else ": .config as is")
    return RunConfig(values, applied, flags, config_text(kconf, header + "\n"))


def run_config_from_defaults(settings: dict[str, str]) -> RunConfig:
    """Every option at its default plus SYMBOL=value settings, validated like
    overrides; needs no .config (estimate validation, tools)."""
    from lib.kconfig import open_tree

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / ".config"
        write_outputs(open_tree(), path, Path(tmp) / "config.py")
        words = " ".join(f"{k}={v}" for k, v in settings.items())
        return load_run_config([f"SET={words}"] if words else [], path)


def render_config_py(values: dict[str, Any]) -> str:
    lines = ["# Generated from .config by scripts/kconfig.py. Do not edit:",
             "# change the configuration with `make menuconfig` or a defconfig.", ""]
    for name, value in values.items():
        lines.append(f"{name}: {type(value).__name__} = {value!r}")
    return "\n".join(lines) + "\n"


def write_outputs(kconf: kconfiglib.Kconfig, config: Path = CONFIG,
                  config_py: Path = CONFIG_PY) -> dict[str, Any]:
    """After validation: write .config and config.py, each atomically."""
    values = typed_values(kconf)
    problems = check_rules(values)
    if problems:
        raise ConfigError(problems, "model configuration")
    write_text_atomic(config, config_text(kconf, "# Generated by kconfig-llm; edit with "
                                                 "`make menuconfig`\n"))
    write_text_atomic(config_py, render_config_py(values))
    return values
