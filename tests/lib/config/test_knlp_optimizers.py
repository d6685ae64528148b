"""knlp's own optimizer and pruning rules load as knlp runs them (lib/config/knlp/):
its AdamWSPAM rule counted in steps, AdamWPrune on its runner's schedule."""

from __future__ import annotations

import pytest

from lib.config.kconfig import ConfigError
from lib.config.run_config import RunConfig, load_valid, typed_values
from tests.lib.config.knlp_files import (
    HEAD,
    PRUNE_HEAD,
    SPAM_HEAD,
    knlp_default,
    loaded,
    magnitude_pruner,
)


def spam_loaded(write_config, *lines: str) -> tuple[RunConfig, list[str]]:
    notes: list[str] = []
    kconf = load_valid(write_config(*SPAM_HEAD, *lines), notes)
    return RunConfig.from_values(typed_values(kconf)), notes


def test_knlps_adamwspam_loads_as_its_own_rule_counted_in_steps(write_config):
    run, notes = spam_loaded(
        write_config,
        "CONFIG_SPAM_PERIODIC_RESET=y",
        "CONFIG_SPAM_INTERVAL=1000",
        "CONFIG_SPAM_WARMUP=y",
        "CONFIG_SPAM_WARMUP_STEPS=200",
        'CONFIG_SPAM_THETA="40.0"',
        "# CONFIG_SPAM_ENABLE_CLIP is not set",
        'CONFIG_SPAM_SPIKE_THRESHOLD="3.0"',
    )
    assert (run.OPTIMIZER, run.SPAM_RULE, run.SPAM_THETA) == ("adamwspam", "knlp", 40.0)
    # knlp's counter moves twice per step: its 1000 and 200 are 500 and 100 steps
    assert (run.SPAM_INTERVAL, run.SPAM_WARMUP_STEPS) == (500, 100)
    # its runner clips whatever SPAM_ENABLE_CLIP says; its code's threshold is 2.0
    assert (run.SPAM_ENABLE_CLIP, run.SPAM_SPIKE_RESET, run.SPAM_SPIKE_THRESHOLD) == (
        True,
        True,
        2.0,
    )
    assert (run.ADAM_AMSGRAD, run.ADAM_BETA2, run.WEIGHT_DECAY, run.TRAIN_GRAD_CLIP) == (
        True,
        0.999,
        0.1,
        1.0,
    )
    text = "\n".join(notes)
    assert "SPAM_ENABLE_CLIP: knlp's runner always clips" in text


def test_knlps_runner_defaults_apply_where_its_file_turns_resets_off(write_config):
    """Without SPAM_INTERVAL / SPAM_WARMUP_STEPS in its .config, knlp's runner passes
    none and gpt2/train.py's 1000 and 1000 apply: resets still happen."""
    run, notes = spam_loaded(write_config, "# CONFIG_SPAM_PERIODIC_RESET is not set")
    assert (run.SPAM_ENABLE_RESET, run.SPAM_INTERVAL, run.SPAM_WARMUP_STEPS) == (True, 500, 500)
    assert any("knlp's runner resets anyway" in n for n in notes)
    run, _ = spam_loaded(write_config, "# CONFIG_SPAM_WARMUP is not set")
    assert (run.SPAM_INTERVAL, run.SPAM_WARMUP_STEPS) == (500, 500)


def test_knlps_odd_spam_counts(write_config):
    # an odd interval: 2k is a multiple of it every `interval` steps
    run, _ = spam_loaded(write_config, "CONFIG_SPAM_INTERVAL=333")
    assert run.SPAM_INTERVAL == 333
    # an odd warmup ends mid-step in knlp's count: not expressible here, refused
    with pytest.raises(ConfigError) as info:
        spam_loaded(write_config, "CONFIG_SPAM_WARMUP_STEPS=201")
    [problem] = info.value.problems
    assert "odd SPAM_WARMUP_STEPS" in problem and "SPAM_WARMUP_STEPS=201" in problem


def test_optimizer_settings_knlp_does_not_read_take_the_values_its_code_uses(write_config):
    run, notes = loaded(
        write_config,
        'CONFIG_DEVICE="cpu"',
        'CONFIG_ADAMW_BETA2="0.95"',
        'CONFIG_ADAMW_WEIGHT_DECAY="0.01"',
        'CONFIG_ADAMW_EPSILON="1e-6"',
    )
    assert (run.ADAM_BETA1, run.ADAM_BETA2, run.ADAM_EPSILON) == (0.9, 0.999, 1e-8)
    assert (run.WEIGHT_DECAY, run.ADAM_AMSGRAD) == (0.1, False)
    text = "\n".join(notes)
    assert "ADAMW_BETA2, ADAMW_WEIGHT_DECAY, ADAMW_EPSILON" not in text  # one notice per reason
    assert "ADAMW_BETA2, ADAMW_EPSILON: knlp's GPT-2 training does not read it" in text
    assert "ADAMW_WEIGHT_DECAY: knlp's GPT-2 training does not read it" in text


def test_knlps_adamwprune_is_adamw_without_decay_or_amsgrad(write_config):
    from lib.config.kconfig import open_tree
    from lib.config.knlp.translate import translate

    text = "\n".join(
        [
            *HEAD[:4],
            "CONFIG_OPTIMIZER_SELECT_ADAMWPRUNE=y",
            "CONFIG_ADAMWPRUNE_BASE_ADAMWSPAM=y",
            "CONFIG_ADAMWPRUNE_AMSGRAD=y",
            'CONFIG_ADAMWPRUNE_WEIGHT_DECAY="0.1"',
            'CONFIG_ADAMWPRUNE_BETA2="0.95"',
        ]
    )
    out = translate(text, "prune.config", open_tree(), lambda name: None)
    values = dict(line.split("=", 1) for line in out.text.splitlines())
    assert values["CONFIG_ADAMWPRUNE_BASE_ADAMW"] == "y" and "CONFIG_SPAM_THETA" not in values
    assert (values["CONFIG_WEIGHT_DECAY"], values["CONFIG_ADAM_AMSGRAD"]) == ('"0"', "n")
    assert values["CONFIG_ADAM_BETA2"] == '"0.999"'
    assert out.missing == []


def knlp_mask_updates(target: float, warmup: int, iters: int) -> list[tuple[int, float]]:
    """knlp's AdamWPrune on GPT-2 as its runner runs it, transcribed for this test from
    the description in lib/config/knlp/names.py: after the optimizer step of iteration i
    (counted from 0; optimizer step i + 1 here) it re-chooses the masks when i is past
    the warmup and a multiple of 50, at target * min(1, (i - warmup) / (3000 - warmup))^3,
    and goes on doing so at the target until the run ends."""
    return [
        (i + 1, target * min(1.0, (i - warmup) / (3000 - warmup)) ** 3)
        for i in range(iters)
        if i > warmup and i % 50 == 0
    ]


def test_knlps_adamwprune_prunes_on_its_runners_schedule(write_config):
    """What its runner passes, not its ADAMWPRUNE_* values: TARGET_SPARSITY, PRUNING_WARMUP,
    the ramp to step 3000, updates every 50 steps; the tied head pruned too."""

    notes: list[str] = []
    lines = [
        'CONFIG_TARGET_SPARSITY="0.7"',
        "CONFIG_PRUNING_WARMUP=100",
        'CONFIG_ADAMWPRUNE_TARGET_SPARSITY="0.5"',
        "CONFIG_ADAMWPRUNE_WARMUP_STEPS=1000",
        "CONFIG_ADAMWPRUNE_FREQUENCY=100",
        "CONFIG_ADAMWPRUNE_RAMP_END_EPOCH=1",
        "CONFIG_GPT2_ADAMWPRUNE_VARIANT_BITTER0=n",
        "CONFIG_GPT2_ADAMWPRUNE_VARIANT_BITTER7=y",
    ]
    kconf = load_valid(write_config(*PRUNE_HEAD, *lines), notes)
    run = RunConfig.from_values(typed_values(kconf))
    assert (run.PRUNING_METHOD, run.ADAMWPRUNE_VARIANT, run.PRUNING_TARGET_SPARSITY) == (
        "state",
        "bitter7",
        0.7,
    )
    assert (run.PRUNING_SCHEDULE, run.PRUNING_SCOPE, run.PRUNING_HEAD) == (
        "cubic_late",
        "global",
        True,
    )
    assert run.GPT2_MAX_ITERS == 10000
    text = "\n".join(notes)
    assert "ADAMWPRUNE_FREQUENCY" in text and "every 50 steps in code" in text
    assert "ADAMWPRUNE_RAMP_END_EPOCH" in text and "ends at step 3000" in text

    pruner = magnitude_pruner(run)
    ours = [
        (step, pruner.target_at(step))
        for step in range(1, run.GPT2_MAX_ITERS + 1)
        if pruner.is_update_step(step)
    ]
    theirs = knlp_mask_updates(0.7, 100, 10000)
    # the same steps at the same sparsities up to the ramp's end (step 3001 here) ...
    assert ours == theirs[: len(ours)] and ours[-1] == (3001, 0.7) and len(ours) == 58
    # ... where knlp goes on re-choosing at the target: masks that only grow (a pruned
    # weight scores 0, below every live weight) come out unchanged, so ours stop there
    assert {s for _, s in theirs[len(ours) :]} == {0.7}


def test_knlps_adamwprune_defaults_and_lengthened_variants(write_config):
    notes: list[str] = []
    run = RunConfig.from_values(typed_values(load_valid(write_config(*PRUNE_HEAD), notes)))
    # no variant line: knlp's runner trains bitter0; PRUNING_WARMUP's knlp default, 100
    assert (run.ADAMWPRUNE_VARIANT, run.PRUNING_WARMUP) == ("bitter0", 101)
    assert run.PRUNING_TARGET_SPARSITY == float(knlp_default("TARGET_SPARSITY")) == 0.9
    kconf = load_valid(
        write_config(
            *PRUNE_HEAD,
            "CONFIG_GPT2_ADAMWPRUNE_VARIANT_BITTER0=n",
            "CONFIG_GPT2_ADAMWPRUNE_VARIANT_BITTER3=y",
        ),
        [],
    )
    run = RunConfig.from_values(typed_values(kconf))
    assert (run.ADAMWPRUNE_VARIANT, run.GPT2_MAX_ITERS) == ("bitter3", 13000)


@pytest.mark.parametrize(
    "line, feature",
    [
        ("CONFIG_PRUNING_WARMUP=120", "updates at multiples of 50 with a PRUNING_WARMUP"),
        ("CONFIG_GPT2_ADAMWPRUNE_VARIANT_BITTER5=y", "several AdamWPrune variants"),
        ("CONFIG_GPT2_MAX_ITERS=2000", "ramp to step 3000 in a run that ends before it"),
    ],
)
def test_knlps_adamwprune_schedules_this_project_cannot_run_are_refused(
    write_config, line, feature
):
    with pytest.raises(ConfigError) as err:
        load_valid(write_config(*PRUNE_HEAD, line), [])
    assert any(feature in p and "this project does not have" in p for p in err.value.problems)


def test_knlps_bitter5_is_refused_its_masks_can_shrink(write_config):
    lines = ["CONFIG_GPT2_ADAMWPRUNE_VARIANT_BITTER0=n", "CONFIG_GPT2_ADAMWPRUNE_VARIANT_BITTER5=y"]
    with pytest.raises(ConfigError) as err:
        load_valid(write_config(*PRUNE_HEAD, *lines), [])
    assert any("knlp's bitter5 masks" in p for p in err.value.problems)
