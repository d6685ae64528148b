"""Schedule lengths against the run's length: every conflict refused at once,
each naming its symbols and a value that works (lib/train/rules.py,
lib/optim/rules.py, lib/prune/rules.py)."""

from __future__ import annotations

import re

import pytest

from lib.config.kconfig import ConfigError, open_tree
from lib.config.run_config import load_run_config, load_valid, write_outputs
from lib.matrix.grid import expand

SPAM = {"OPTIMIZER": "adamwspam"}
PRUNED = {"PRUNING_MODE": "single", "PRUNING_METHOD": "magnitude"}
EARLY = {"TRAIN_EARLY_STOP": "y"}
WSD = {"LR_SCHEDULE": "wsd"}


@pytest.fixture
def defaults(tmp_path):
    """A .config with every option at its default (warmup 30 of 300 steps)."""
    path = tmp_path / ".config"
    write_outputs(open_tree(), path, tmp_path / "config.py")
    return path


def load(path, settings: dict[str, str]):
    words = " ".join(f"{k}={v}" for k, v in settings.items())
    return load_run_config([f"SET={words}"], path)


def problems(path, settings: dict[str, str]) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load(path, settings)
    return info.value.problems


def suggestions(problem: str) -> list[dict[str, str]]:
    """The fixes a problem offers after "use": "A=1 or B=2 and C=3" -> [{A: 1}, {B: 2, C: 3}]."""
    offered = problem.rsplit("; use ", 1)[1]
    return [dict(re.findall(r"(\w+)=(\w[\w.]*)", fix)) for fix in re.split(r",? or ", offered)]


def alias(settings: dict[str, str]) -> dict[str, str]:
    return {("GPT2_MAX_ITERS" if k == "MAX_ITERS" else k): v for k, v in settings.items()}


# (settings, symbols the one problem names): one per schedule length
CONFLICTS = [
    ({"GPT2_MAX_ITERS": "20"}, ["GPT2_WARMUP_STEPS=30", "GPT2_MAX_ITERS=20"]),
    ({"GPT2_MAX_ITERS": "29"}, ["GPT2_WARMUP_STEPS=30", "GPT2_MAX_ITERS=29"]),
    (
        {**WSD, "GPT2_MAX_ITERS": "100", "LR_DECAY_FRACTION": "0.8"},
        ["GPT2_WARMUP_STEPS=30", "LR_DECAY_FRACTION=0.8", "GPT2_MAX_ITERS=100"],
    ),
    (
        {**WSD, "GPT2_MAX_ITERS": "40", "GPT2_WARMUP_STEPS": "4", "LR_DECAY_FRACTION": "0.01"},
        ["LR_DECAY_FRACTION=0.01", "GPT2_MAX_ITERS=40"],
    ),
    ({**SPAM, "SPAM_INTERVAL": "10"}, ["SPAM_CLIP_SKIP_STEPS=20", "SPAM_INTERVAL=10"]),
    (
        {**PRUNED, "PRUNING_WARMUP": "200", "PRUNING_RAMP_END": "200"},
        ["PRUNING_WARMUP=200", "PRUNING_RAMP_END=200"],
    ),
    ({**PRUNED, "GPT2_MAX_ITERS": "100"}, ["PRUNING_RAMP_END=250", "GPT2_MAX_ITERS=100"]),
    (
        {**EARLY, "TRAIN_EARLY_STOP_PATIENCE": "3"},
        ["TRAIN_EARLY_STOP_PATIENCE=3", "GPT2_MAX_ITERS=300", "GPT2_EVAL_INTERVAL=100"],
    ),
]


@pytest.mark.parametrize("settings, named", CONFLICTS)
def test_each_schedule_length_is_refused_with_fixes_that_load(defaults, settings, named):
    [problem] = problems(defaults, settings)
    for symbol in named:
        assert f"CONFIG_{symbol}" in problem
    fixes = suggestions(problem)
    assert fixes and all(fixes), problem
    for fix in fixes:  # every value offered works: the configuration then loads
        load(defaults, {**settings, **alias(fix)})


def test_the_issue_case_names_the_lr_warmup_and_a_working_value(defaults):
    with pytest.raises(ConfigError) as info:
        load_run_config(["MAX_ITERS=20"], defaults)
    [problem] = info.value.problems
    assert problem.startswith("CONFIG_GPT2_WARMUP_STEPS=30 is past CONFIG_GPT2_MAX_ITERS=20")
    assert "the last at 66.7 % of the 0.001 peak" in problem  # 20 / 30: the last step's share
    assert "use WARMUP=2" in problem  # what `make` takes as typed (GPT2_WARMUP_STEPS= it refuses)
    assert load_run_config(["MAX_ITERS=20", "WARMUP=2"], defaults).GPT2_WARMUP_STEPS == 2


@pytest.mark.parametrize("warmup, total", [(0, 1), (19, 20), (0, 20)])
def test_a_warmup_that_ends_before_the_run_is_accepted(defaults, warmup, total):
    run = load(defaults, {"GPT2_WARMUP_STEPS": str(warmup), "GPT2_MAX_ITERS": str(total)})
    assert (run.GPT2_WARMUP_STEPS, run.GPT2_MAX_ITERS) == (warmup, total)


def test_a_wsd_decay_that_just_fits_is_accepted(defaults):
    # 100 steps: warmup 30, decay round(100 x 0.7) = 70, nothing left over
    run = load(defaults, {**WSD, "GPT2_MAX_ITERS": "100", "LR_DECAY_FRACTION": "0.7"})
    assert run.LR_DECAY_FRACTION == 0.7


def test_early_stopping_that_can_fire_is_accepted(defaults):
    # evaluations at 100 and 200 before the last: patience 1 can stop at 200
    assert (
        load(defaults, {**EARLY, "TRAIN_EARLY_STOP_PATIENCE": "1"}).TRAIN_EARLY_STOP_PATIENCE == 1
    )


def test_two_conflicts_are_reported_in_one_error(defaults):
    found = problems(defaults, {**PRUNED, "GPT2_MAX_ITERS": "20"})
    assert len(found) == 2
    assert found[0].startswith("CONFIG_GPT2_WARMUP_STEPS=30 is past")
    assert found[1].startswith("CONFIG_PRUNING_RAMP_END=250 is past CONFIG_GPT2_MAX_ITERS=20")


def test_rules_are_reported_beside_a_file_problem(write_config):
    # an out-of-range value and a schedule conflict in one defconfig: both at once
    path = write_config("CONFIG_BATCH_SIZE=0", "CONFIG_GPT2_MAX_ITERS=20")
    with pytest.raises(ConfigError) as info:
        load_valid(path)
    [range_problem, warmup] = info.value.problems
    assert "CONFIG_BATCH_SIZE=0" in range_problem and "allowed: 1 to 2048" in range_problem
    assert warmup.startswith("CONFIG_GPT2_WARMUP_STEPS=30 is past CONFIG_GPT2_MAX_ITERS=20")


def test_a_rule_on_a_refused_value_is_left_out(defaults):
    # MAX_ITERS=0 is refused and stays 300: no rule may judge the 300 nobody asked for
    [problem] = problems(defaults, {"GPT2_MAX_ITERS": "0", "GPT2_WARMUP_STEPS": "400"})
    assert "CONFIG_GPT2_MAX_ITERS=0 was not applied" in problem


def test_matrix_runs_are_checked_and_each_conflict_named(defaults):
    with pytest.raises(ConfigError) as info:
        expand([], defaults, [[("MAX_ITERS", "20")], [("MAX_ITERS", "100")]])
    [problem] = info.value.problems
    assert "CONFIG_GPT2_WARMUP_STEPS=30 is past CONFIG_GPT2_MAX_ITERS=20" in problem
    assert "(in 1 run, e.g." in problem and problem.endswith(" MAX_ITERS=20)")


def test_a_run_record_loads_as_it_ran_and_is_checked_when_continued(defaults, tmp_path):
    run = load(defaults, {"GPT2_MAX_ITERS": "20", "GPT2_WARMUP_STEPS": "2"})
    record = tmp_path / "config.txt"  # as a run written before the rule would be
    record.write_text(
        run.config_text.replace("CONFIG_GPT2_WARMUP_STEPS=2", "CONFIG_GPT2_WARMUP_STEPS=30")
    )
    assert load_run_config([], record).GPT2_WARMUP_STEPS == 30
    with pytest.raises(ConfigError, match="CONFIG_GPT2_WARMUP_STEPS=30 is past"):
        load_run_config(["RUN_NAME=again"], record)
    assert load_run_config(["MAX_ITERS=300"], record).GPT2_MAX_ITERS == 300


def test_a_warmup_of_the_whole_run_is_accepted_and_wsd_still_needs_room(defaults):
    # The last step reaches the peak: an LR range test, or knlp's 100-step debugging files.
    run = load(defaults, {"GPT2_MAX_ITERS": "30"})
    assert run.GPT2_WARMUP_STEPS == run.GPT2_MAX_ITERS == 30
    found = problems(defaults, {**WSD, "GPT2_MAX_ITERS": "30", "LR_DECAY_FRACTION": "0.5"})
    assert len(found) == 1 and "CONFIG_LR_DECAY_FRACTION=0.5" in found[0]
