"""Every visible symbol changes what the run does.

For every defconfig, and for every member of the model, attention,
optimizer and pruning choices, each visible symbol of those menus is changed
in turn (a bool flipped, an int or float moved within its range, another
member of a choice selected) and the run's resolved settings (lib/resolved:
the model config, the built optimizer and pruner, the LR schedule, the batch
plan, the data and run folders) must change. A symbol that is visible on a path but read by nobody on
it fails here, as SPAM once ignored WEIGHT_DECAY.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import kconfiglib
import pytest
import torch

from lib.config.kconfig import float_bounds, load_strict, open_tree
from lib.config.rules import broken_rules
from lib.config.run_config import RunConfig, typed_values
from lib.paths import ROOT
from lib.speed.compile import COMPILE_MODES
from lib.train.resolved import resolved_settings

# The menus whose symbols shape the run's model, optimizer, pruner, schedule,
# data and run folder. The evaluation, matrix, tracking, monitoring and
# multi-GPU menus configure other commands or services; tests/test_tree.py
# requires a reader for each of their symbols.
SCOPE = (
    "gpt2/Kconfig",
    "gpt2/Kconfig.rgsa",
    "hamt/Kconfig",
    "lib/optim/Kconfig",
    "lib/prune/Kconfig",
    "lib/train/Kconfig",
    "lib/speed/Kconfig",
    "lib/data/Kconfig",
    "lib/run/Kconfig",
)
# Read on other paths, each named: the test matrix (multiple-selection
# menus), the training loop's own stop/log/eval clocks, the device set-up.
ELSEWHERE = {
    "COMPILE_MODE": "lib/speed/compile.py",
    "COMPILE_REGIONAL": "lib/speed/compile.py",
    "SDPA_BACKEND": "lib/speed/apply.py",
    "TF32": "lib/speed/apply.py",
    "TRAIN_LOSS_IMPL": "lib/speed/apply.py",
    "TRAIN_FLOAT8": "lib/speed/apply.py",
    "PIN_MEMORY": "lib/speed/apply.py",
    "CPU_LINEAR_BACKEND": "lib/speed/apply.py",
    "CPU_MALLOC_KEEP": "lib/speed/apply.py",
    "OPTIMIZER_MODE": "lib/matrix/grid.py",
    "PRUNING_MODE_MULTIPLE": "lib/matrix/grid.py",
    "GPT2_ATTENTION_MULTIPLE": "lib/matrix/grid.py",
    "TRAIN_MAX_TIME": "lib/train/trainer.py",
    "TRAIN_EVAL_ITERS": "lib/train/evaluator.py",
    "TRAIN_LOG_INTERVAL": "lib/train/steplog.py",
    "TRAIN_DIVERGENCE_FACTOR": "lib/train/steplog.py",
    "TRAIN_GRAD_CLIP": "lib/train/build.py",
    "TRAIN_EARLY_STOP": "lib/train/early_stop.py",
    "TRAIN_EARLY_STOP_PATIENCE": "lib/train/early_stop.py",
    "TRAIN_EARLY_STOP_MIN_DELTA": "lib/train/early_stop.py",
    "DEVICE": "lib/train/parts.py",
    "MIXED_PRECISION": "lib/speed/precision.py",
    "MIXED_PRECISION_DTYPE": "lib/speed/precision.py",
    "COMPILE_STRICT": "lib/train/fallback.py",
    "TRAIN_GRADIENT_CHECKPOINTING": "lib/train/recompute.py",
    "TRAIN_OOM_FALLBACK": "lib/train/fallback.py",
    "TRAIN_OOM_MIN_BATCH": "lib/train/fallback.py",
    "TRAIN_SEED": "lib/train/parts.py",
    "HYPER_PARAM": "lib/estimate/fit.py",
    "DATA_VAL_FRACTION": "lib/data/prepared.py",
    "BACKUP_DIR": "lib/run/backup.py",
    # Runtime only: when checkpoints are written and how the GPU is set up.
    "SAVE_CHECKPOINT": "lib/run/checkpointer.py",
    "CHECKPOINT_INTERVAL": "lib/run/checkpointer.py",
    "CUDNN_BENCHMARK": "lib/speed/apply.py",
    "GPU_WARMUP": "lib/speed/apply.py",
    "PYTORCH_CUDA_ALLOC_CONF": "lib/speed/allocator.py",
}
# Where the model, attention, optimizer and pruning paths fork.
FORKS = (
    "MODEL",
    "GPT2_ATTENTION",
    "OPTIMIZER",
    "ADAMWPRUNE_BASE",
    "PRUNING_METHOD",
    "ADAMWPRUNE_VARIANT",
    "HAMT_BINDING",
    "SPAM_RULE",
)


def _in_scope(item) -> bool:
    return any(node.filename in SCOPE for node in item.nodes)


def _is_multiple(run: RunConfig) -> bool:
    return (
        run.OPTIMIZER_MODE == "multiple"
        or run.PRUNING_MODE == "multiple"
        or bool(run.GPT2_ATTENTION_MULTIPLE)
    )


def _candidates(sym: kconfiglib.Symbol) -> list[str]:
    """Values other than the current one, valid for the symbol's type and range."""
    now = sym.str_value
    if sym.orig_type == kconfiglib.BOOL:
        return ["n" if sym.tri_value == 2 else "y"]
    if sym.orig_type == kconfiglib.INT:
        lo, hi = next(
            (
                (int(a.str_value), int(b.str_value))
                for a, b, cond in sym.ranges
                if kconfiglib.expr_value(cond)
            ),
            (-(2**31), 2**31 - 1),
        )
        v = int(now)
        wanted = [v * 2, v // 2, v + 1, v - 1, v + 2, lo, hi, (lo + hi) // 2]
        return [str(c) for c in dict.fromkeys(wanted) if lo <= c <= hi and c != v]
    bounds = float_bounds(sym)
    if bounds:
        lo, hi = bounds
        v = float(now)
        wanted = [v * 2, v / 2, (v + lo) / 2, (v + hi) / 2, lo, hi]
        return [
            repr(c) for c in dict.fromkeys(wanted) if lo <= c <= hi and math.isfinite(c) and c != v
        ]
    return [now + "x"]


def _resolution(values: dict) -> dict | None:
    """The run's resolved settings; None for a configuration that breaks a rule or
    is a test matrix (several runs)."""
    run = RunConfig.from_values(values)
    if broken_rules(run) or _is_multiple(run):
        return None
    return resolved_settings(run)


class Subject:
    """One configuration in memory whose symbols can be changed and restored.
    `known`: resolutions already made, by the configuration's values (a
    resolution depends on them alone), shared by the tests of this file."""

    def __init__(self, kconf: kconfiglib.Kconfig, known: dict | None = None):
        self.kconf = kconf
        self.known = {} if known is None else known
        self.base = self.resolve()

    def resolve(self) -> dict | None:
        values = typed_values(self.kconf)
        key = tuple(values.items())
        if key not in self.known:
            self.known[key] = _resolution(values)
        return self.known[key]

    def changed_by(self, sym: kconfiglib.Symbol) -> bool | None:
        """Whether some valid other value of sym changes the resolution; None: none valid."""
        saved = sym.user_value
        valid = None
        try:
            for value in _candidates(sym):
                sym.set_value(value)
                if sym.str_value != value and sym.orig_type != kconfiglib.BOOL:
                    continue
                after = self.resolve()
                if after is None:
                    continue
                valid = after != self.base
                if valid:
                    return True
            return valid
        finally:
            sym.unset_value() if saved is None else sym.set_value(saved)

    def choice_changed_by(
        self, choice: kconfiglib.Choice, member: kconfiglib.Symbol
    ) -> bool | None:
        saved = choice.selection
        try:
            member.set_value(2)
            after = self.resolve()
            return None if after is None else after != self.base
        finally:
            saved.set_value(2)


def _dead_symbols(kconf: kconfiglib.Kconfig, known: dict | None = None) -> list[str]:
    subject = Subject(kconf, known)
    if subject.base is None:
        return []
    dead = []
    for sym in kconf.unique_defined_syms:
        if (
            sym.choice is not None
            or not _in_scope(sym)
            or sym.name in ELSEWHERE
            or not sym.visibility
            or not any(n.prompt for n in sym.nodes)
        ):
            continue
        if subject.changed_by(sym) is False:
            dead.append(sym.name)
    for name, choice in kconf.named_choices.items():
        if not _in_scope(choice) or name in ELSEWHERE or not choice.visibility:
            continue
        for member in choice.syms:
            if member is not choice.selection and member.visibility:
                if subject.choice_changed_by(choice, member) is False:
                    dead.append(f"{name}={member.name}")
    return dead


@pytest.fixture(autouse=True)
def _compile_recorded(monkeypatch) -> list[tuple[object, str | None]]:
    """resolved_settings reports whether the forward is compiled
    (training.step.compile.compiled: CompileState.use ran), never the compiled
    code. torch.compile, lazy as it is, still loads dynamo and inductor (seconds
    per process) and sets up a wrapper (tens of ms a call, for every
    resolution of a COMPILE_MODEL configuration); its stand-in records what it
    was asked (the forward and the mode) and hands back the forward."""
    asked = []

    def compile_recorded(model, *, mode=None):
        assert mode in COMPILE_MODES.values(), mode
        asked.append((model, mode))
        return model

    monkeypatch.setattr(torch, "compile", compile_recorded)
    return asked


# Resolutions by configuration values, for the tests that read the project's own
# code (the one below that changes it resolves afresh).
KNOWN: dict = {}


def _fork_bases() -> list[tuple[str, str]]:
    kconf = open_tree()
    return [(name, member.name) for name in FORKS for member in kconf.named_choices[name].syms]


DEFCONFIGS = sorted(p.name for p in (ROOT / "defconfigs").iterdir())


# Slow: 38 configurations of some 80 resolutions each. The fast suite keeps the sweep
# below, from the defaults through every member of every choice on the run's path.
@pytest.mark.slow
@pytest.mark.parametrize("name", DEFCONFIGS)
def test_every_visible_symbol_of_a_defconfig_is_read(name):
    assert _dead_symbols(load_strict(ROOT / "defconfigs" / name), KNOWN) == []


@pytest.mark.parametrize("choice, member", _fork_bases())
def test_every_visible_symbol_of_each_choice_is_read(tmp_path: Path, choice, member):
    kconf = open_tree()
    for needed in {
        "ADAMWPRUNE_BASE": "OPTIMIZER_ADAMWPRUNE",
        "ADAMWPRUNE_VARIANT": "OPTIMIZER_ADAMWPRUNE",
        "PRUNING_METHOD": "PRUNING_MODE_SINGLE",
        "HAMT_BINDING": "MODEL_HAMT",
        "SPAM_RULE": "OPTIMIZER_ADAMWSPAM",
    }.get(choice, "").split():
        kconf.syms[needed].set_value(2)
    if choice == "ADAMWPRUNE_VARIANT" or member == "PRUNING_METHOD_STATE":
        kconf.syms["PRUNING_MODE_SINGLE"].set_value(2)
        kconf.syms["OPTIMIZER_ADAMWPRUNE"].set_value(2)
    kconf.syms[member].set_value(2)
    assert kconf.syms[member].tri_value == 2, f"{member} cannot be selected from the defaults"
    assert _dead_symbols(kconf, KNOWN) == []


def test_symbols_read_elsewhere_are_read_there():
    assert [name for name, path in ELSEWHERE.items() if name not in (ROOT / path).read_text()] == []


def test_the_check_fails_on_a_symbol_nobody_reads(monkeypatch):
    """WEIGHT_DECAY ignored by the optimizer is caught (the test can fail)."""
    import lib.train.build as build

    real = build.build_optimizer

    def ignores_weight_decay(s, lr, model, device):
        return real(replace(s, WEIGHT_DECAY=0.1), lr, model, device)

    monkeypatch.setattr(build, "build_optimizer", ignores_weight_decay)
    assert "WEIGHT_DECAY" in _dead_symbols(open_tree())
