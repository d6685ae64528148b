"""Optimizer and pruning choices: invalid pairs never load; run names follow the field."""

from __future__ import annotations

import pytest
import torch

from lib.config.kconfig import ConfigError, load_strict, open_tree
from lib.config.run_config import load_run_config, write_outputs
from lib.optim import build_optimizer
from lib.optim.spam import AdamWSPAM
from lib.train.naming import run_tag


def load(write_config, tmp_path, *lines):
    write_outputs(load_strict(write_config(*lines)), tmp_path / ".config", tmp_path / "config.py")
    return load_run_config([], tmp_path / ".config")


@pytest.mark.parametrize(
    "lines, expect",
    [
        (
            [
                "CONFIG_OPTIMIZER_ADAMWPRUNE=y",
                "CONFIG_PRUNING_MODE_SINGLE=y",
                "CONFIG_PRUNING_METHOD_MAGNITUDE=y",
            ],
            "PRUNING_METHOD_MAGNITUDE=y was not applied",
        ),
        (
            ["CONFIG_PRUNING_MODE_SINGLE=y", "CONFIG_PRUNING_METHOD_STATE=y"],
            "OPTIM_HAS_ADAMWPRUNE is y if OPTIMIZER_ADAMWPRUNE",
        ),
        (
            ["CONFIG_OPTIMIZER_ADAMWSPAM=y", "CONFIG_ADAMWPRUNE_VARIANT_BITTER3=y"],
            "depends on PRUNING_METHOD_STATE",
        ),
    ],
)
def test_invalid_optimizer_pruning_pairs_are_rejected(write_config, lines, expect):
    with pytest.raises(ConfigError, match=expect):
        load_strict(write_config(*lines))


def test_cross_symbol_rules_are_checked_at_load(write_config, tmp_path):
    with pytest.raises(ConfigError, match="PRUNING_RAMP_END=250 is past CONFIG_GPT2_MAX_ITERS=100"):
        load(
            write_config,
            tmp_path,
            "CONFIG_PRUNING_MODE_SINGLE=y",
            "CONFIG_PRUNING_METHOD_MAGNITUDE=y",
            "CONFIG_GPT2_MAX_ITERS=100",
        )
    # the authors' launcher ran warmup 1000 with resets every 500: accepted
    run = load(
        write_config,
        tmp_path,
        "CONFIG_OPTIMIZER_ADAMWSPAM=y",
        "CONFIG_SPAM_INTERVAL=500",
        "CONFIG_SPAM_WARMUP_STEPS=1000",
    )
    assert (run.SPAM_INTERVAL, run.SPAM_WARMUP_STEPS) == (500, 1000)


@pytest.mark.parametrize(
    "lines, expect",
    [
        (
            [
                "CONFIG_SPAM_INTERVAL=200",
                "CONFIG_SPAM_WARMUP_STEPS=50",
                "CONFIG_SPAM_CLIP_SKIP_STEPS=200",
            ],
            "CONFIG_SPAM_CLIP_SKIP_STEPS=200 must be below CONFIG_SPAM_INTERVAL=200: no call would ever",
        ),
        (
            ["CONFIG_SPAM_CLIP_SKIP_STEPS=1"],
            "CONFIG_SPAM_CLIP_SKIP_STEPS=1 clips call 1 against a zero second moment",
        ),
    ],
)
def test_spam_clipping_window_rules(write_config, tmp_path, lines, expect):
    with pytest.raises(ConfigError, match=expect):
        load(write_config, tmp_path, "CONFIG_OPTIMIZER_ADAMWSPAM=y", *lines)
    # Entries with v == 0 spared, clipping may start at once.
    run = load(
        write_config,
        tmp_path,
        "CONFIG_OPTIMIZER_ADAMWSPAM=y",
        "CONFIG_SPAM_CLIP_SKIP_STEPS=0",
        "CONFIG_SPAM_CLIP_SPARE_UNSEEN=y",
    )
    assert run.SPAM_CLIP_SKIP_STEPS == 0


class TwoGroups(torch.nn.Module):
    """The model interface build_optimizer needs: param_groups(weight_decay)."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 2)

    def param_groups(self, weight_decay, rule=""):
        return [
            {"params": [self.lin.weight], "weight_decay": weight_decay},
            {"params": [self.lin.bias], "weight_decay": 0.0},
        ]


@pytest.mark.parametrize("optimizer", ["ADAMW", "ADAMWSPAM", "ADAMWPRUNE"])
def test_adam_family_shares_betas_epsilon_and_weight_decay(write_config, tmp_path, optimizer):
    run = load(
        write_config,
        tmp_path,
        f"CONFIG_OPTIMIZER_{optimizer}=y",
        'CONFIG_ADAM_BETA1="0.8"',
        'CONFIG_ADAM_BETA2="0.999"',
        'CONFIG_ADAM_EPSILON="1e-6"',
        'CONFIG_WEIGHT_DECAY="0.05"',
    )
    opt = build_optimizer(run.optim, run.LEARNING_RATE, TwoGroups(), torch.device("cpu"))
    assert [(g["betas"], g["eps"], g["weight_decay"]) for g in opt.param_groups] == [
        ((0.8, 0.999), 1e-6, 0.05),
        ((0.8, 0.999), 1e-6, 0.0),
    ]
    assert isinstance(opt, AdamWSPAM) == (optimizer == "ADAMWSPAM")


def test_spam_defaults_are_the_authors_knobs(write_config, tmp_path):
    run = load(
        write_config,
        tmp_path,
        "CONFIG_OPTIMIZER_ADAMWSPAM=y",
        "CONFIG_SPAM_INTERVAL=300",
        "CONFIG_SPAM_RESTART_BIAS_CORRECTION=y",
    )
    assert (run.SPAM_THETA, run.SPAM_CLIP_SKIP_STEPS, run.SPAM_WARMUP_STEPS) == (5000.0, 20, 150)
    assert not run.SPAM_CLIP_SPARE_UNSEEN
    opt = build_optimizer(run.optim, run.LEARNING_RATE, TwoGroups(), torch.device("cpu"))
    assert (opt.interval, opt.warmup_steps, opt.clip_skip_steps) == (300, 150, 20)
    assert opt.restart_bias_correction and not opt.spare_unseen and opt.reset
    assert opt.param_groups[0]["theta"] == 5000.0 and opt.param_groups[0]["clip"]


def test_several_optimizers_are_a_matrix_not_one_run(write_config, tmp_path):
    """OPTIMIZER_MODE_MULTIPLE hides OPTIMIZER: building one optimizer, or
    estimating one run's memory, says so instead of assuming AdamW."""
    from lib.estimate import estimate_memory
    from lib.hardware.devices import cpu_info

    run = load(
        write_config,
        tmp_path,
        "CONFIG_OPTIMIZER_MODE_MULTIPLE=y",
        "CONFIG_OPTIMIZER_ENABLE_ADAMWSPAM=y",
    )
    assert run.OPTIMIZER is None
    with pytest.raises(ValueError, match="OPTIMIZER_MODE_MULTIPLE selects several optimizers"):
        build_optimizer(run.optim, run.LEARNING_RATE, TwoGroups(), torch.device("cpu"))
    with pytest.raises(ValueError, match="one run needs OPTIMIZER_MODE=single"):
        estimate_memory(run, vocab_size=256, device_info=cpu_info())


def test_adamwprune_defaults_to_state_pruning(write_config, tmp_path):
    run = load(write_config, tmp_path, "CONFIG_OPTIMIZER_ADAMWPRUNE=y")
    assert (run.PRUNING_MODE, run.PRUNING_METHOD, run.ADAMWPRUNE_VARIANT) == (
        "single",
        "state",
        "bitter7",
    )
    assert run.ADAMWPRUNE_BASE == "adamw" and run.ADAM_BETA2 == 0.95


@pytest.mark.parametrize(
    "lines, tag",
    [
        ([], "gpt2_adamw_none"),
        (
            [
                "CONFIG_OPTIMIZER_ADAMWSPAM=y",
                "CONFIG_PRUNING_MODE_SINGLE=y",
                "CONFIG_PRUNING_METHOD_MAGNITUDE=y",
            ],
            "gpt2_adamwspam_magnitude_50",
        ),
        (
            ["CONFIG_OPTIMIZER_ADAMWPRUNE=y", 'CONFIG_PRUNING_TARGET_SPARSITY="0.7"'],
            "gpt2_adamwprune_bitter7_state_70",
        ),
        (
            [
                "CONFIG_PRUNING_MODE_SINGLE=y",
                "CONFIG_PRUNING_METHOD_MOVEMENT=y",
                'CONFIG_PRUNING_TARGET_SPARSITY="0.95"',
            ],
            "gpt2_adamw_movement_95",
        ),
        (
            ["CONFIG_OPTIMIZER_ADAMWPRUNE=y", "CONFIG_ADAMWPRUNE_VARIANT_BITTER4=y"],
            "gpt2_adamwprune_bitter4_state_50",
        ),
        (
            [
                "CONFIG_OPTIMIZER_ADAMWPRUNE=y",
                "CONFIG_ADAMWPRUNE_VARIANT_BITTER4=y",
                "CONFIG_ADAMWPRUNE_BITTER4_RANK_BUDGET=y",
            ],
            "gpt2_adamwprune_bitter4rank_state_50",
        ),
    ],
)
def test_run_tags_follow_the_field_convention(write_config, tmp_path, lines, tag):
    assert run_tag(load(write_config, tmp_path, *(lines or ["# defaults"]))) == tag


def test_every_float_default_lies_within_its_bounds():
    from lib.config.kconfig import float_bounds

    for sym in open_tree().unique_defined_syms:
        bounds = float_bounds(sym)
        if bounds:
            assert bounds[0] <= float(sym.str_value or sym.defaults[0][0].str_value) <= bounds[1], (
                sym.name
            )
