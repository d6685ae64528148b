"""MATRIX_TUNE_SYMBOLS and the budget: parsed ranges, and the errors a user sees."""

from __future__ import annotations

import math

import pytest

from lib.config.kconfig import ConfigError
from lib.config.overrides import split_args
from lib.config.run_config import load_run_config
from lib.tune import space
from lib.tune.budget import Budget
from tests.lib.matrix.conftest import TINY, write_config


@pytest.fixture
def tiny(tmp_path):
    return write_config(tmp_path / ".config", {**TINY, "LEARNING_RATE": "0.002"})


def _problems(text: str, values: dict) -> list[str]:
    with pytest.raises(ConfigError) as err:
        space.parse(text, values)
    return err.value.problems


def test_bare_name_searches_a_log_decade_either_side_of_the_configured_value(tiny):
    run = load_run_config([], tiny)
    (lr,) = space.parse("LR", run.values)
    assert (lr.name, lr.symbol, lr.log, lr.integer) == ("LR", "LEARNING_RATE", True, False)
    assert math.isclose(lr.low, 0.0002) and math.isclose(lr.high, 0.02)


def test_explicit_ranges_int_and_float(tiny):
    run = load_run_config([], tiny)
    lr, warm = space.parse("LR=1e-4..1e-2:log WARMUP=1..10", run.values)
    assert (lr.low, lr.high, lr.log) == (1e-4, 1e-2, True)
    assert (warm.symbol, warm.low, warm.high, warm.log, warm.integer) == (
        "GPT2_WARMUP_STEPS",
        1,
        10,
        False,
        True,
    )
    assert warm.text(4.0) == "4" and lr.text(0.00123456789) == "0.00123457"


def test_misspelt_name_gets_the_closest_numeric_symbol(tiny):
    run = load_run_config([], tiny)
    problems = _problems("LRR WEIGHT_DECAI", run.values)
    assert "LRR is no Kconfig symbol or alias; did you mean LR?" in problems[0]
    assert "did you mean WEIGHT_DECAY?" in problems[1]
    # lower case means the symbol; a switch word is answered with what TUNE= takes
    assert "lr is no Kconfig symbol or alias; did you mean LR?" in _problems("lr", run.values)[0]
    [switch] = _problems("y", run.values)
    assert "y is no Kconfig symbol or alias. TUNE= names what to tune, not whether" in switch


def test_non_numeric_hidden_and_budget_symbols_are_refused(tiny):
    run = load_run_config([], tiny)
    (text,) = _problems("DEVICE", run.values)
    assert "not numeric" in text
    (hidden,) = _problems("SPAM_THETA", run.values)  # AdamW: SPAM's menu is hidden
    assert "hidden in this configuration" in hidden
    assert space.parse("SPAM_THETA LR", run.values, skip_hidden=True)[0].name == "LR"
    (budget,) = _problems("MAX_ITERS", run.values)
    assert "it is the budget" in budget


def test_bad_ranges_are_refused_with_what_is_allowed(tiny):
    run = load_run_config([], tiny)
    problems = _problems(
        "LR=1e-2..1e-4 WEIGHT_DECAY=0..0.1:log WARMUP=1.5..3 LR=x TRAIN_LOG_INTERVAL=0..5",
        run.values,
    )
    assert "low end must be below the high end" in problems[0]
    assert "log range needs a low end above 0" in problems[1]
    assert "integer; give integer ends" in problems[2]
    assert '"x" is not a range; write lo..hi' in problems[3]
    assert "allows 1 to" in problems[4]  # TRAIN_LOG_INTERVAL's own range starts at 1


def test_at_edge_is_within_five_percent_of_the_log_width(tiny):
    (lr,) = space.parse("LR=1e-4..1e-2:log", load_run_config([], tiny).values)
    assert lr.at_edge(1.2e-4) and lr.at_edge(9e-3)  # 4 % and 2.3 % of two decades
    assert not lr.at_edge(1e-3) and not lr.at_edge(1.5e-4)  # 8.8 % in from the low end


def test_grid_spaces_each_range_evenly_within_the_trial_budget(tiny):
    dims = space.parse("LR=1e-4..1e-2:log WARMUP=1..9", load_run_config([], tiny).values)
    grid = space.grid_points(dims, 10)  # 3 x 3 = 9 <= 10
    assert grid["LR"] == [1e-4, 1e-3, 1e-2] and grid["WARMUP"] == [1, 5, 9]


def test_tune_shorthand_turns_tuning_on_with_those_symbols():
    overrides, _, problems = split_args(["TUNE=LR WARMUP", "TUNE_TRIALS=4"])
    assert not problems
    assert overrides == [
        ("MATRIX_TUNE", "y"),
        ("MATRIX_TUNE_SYMBOLS", "LR WARMUP"),
        ("TUNE_TRIALS", "4"),
    ]
    assert split_args(["TUNE=n"])[0] == [("MATRIX_TUNE", "n")]


def test_config_rules_check_the_space_and_two_steps_per_trial(tiny):
    # TINY: 12 steps; 10 % gives 1 step (no two evaluations), 17 % the 2 steps needed.
    with pytest.raises(ConfigError) as err:
        load_run_config(["TUNE=LR SPAM_THETAA", "TUNE_FRACTION=10"], tiny)
    text = str(err.value)
    assert "did you mean SPAM_THETA?" in text
    assert "gives each trial 1 of CONFIG_GPT2_MAX_ITERS=12 steps" in text
    assert "raise it to 17 (TUNE_FRACTION=17)" in text
    assert Budget.from_run(load_run_config(["TUNE=LR", "TUNE_FRACTION=17"], tiny)).steps == 2
    run = load_run_config(["TUNE=LR", "TUNE_FRACTION=70", "TUNE_TRIALS=3"], tiny)
    budget = Budget.from_run(run)
    assert (budget.trials, budget.steps, budget.sampler, budget.pruner) == (
        3,
        8,
        "tpe",
        "successive_halving",
    )


def test_a_plan_whose_configurations_have_nothing_to_tune_is_refused(tiny):
    from lib.matrix.grid import expand
    from lib.tune.stage import check

    base, planned = expand(["TUNE=MUON_LR", "TUNE_FRACTION=70"], tiny)  # AdamW alone
    with pytest.raises(ConfigError, match="MUON_LR is hidden in this configuration"):
        check(base, planned)
    base, planned = expand(["TUNE=MUON_LR LR", "TUNE_FRACTION=70"], tiny)
    check(base, planned)  # LR applies


def test_a_run_too_short_for_any_fraction_is_told_to_train_longer_not_to_raise_it(tiny):
    # 1 step: even 100 % gives one step; the advice is a length, never "raise to 100 or more"
    with pytest.raises(ConfigError) as err:
        load_run_config(["TUNE=LR", "TUNE_FRACTION=100", "MAX_ITERS=1", "WARMUP=0"], tiny)
    text = str(err.value)
    assert "train longer: MAX_ITERS=2 or more" in text and "raise it" not in text
    with pytest.raises(ConfigError, match="MAX_ITERS=10 or more"):  # 20 % of 10 is 2 steps
        load_run_config(["TUNE=LR", "MAX_ITERS=1", "WARMUP=0"], tiny)


@pytest.mark.parametrize(
    "steps, configured, expected",
    [(400, 250, 100), (500, 250, 250), (8, 4, 4), (7, 4, 1), (2, 4, 1), (1000, 100, 100)],
)
def test_trials_too_short_for_two_evaluations_evaluate_four_times(steps, configured, expected):
    from lib.tune.budget import trial_eval_interval

    assert trial_eval_interval(steps, configured) == expected


def test_a_tuned_warmup_fits_in_a_trial(tiny):
    run = load_run_config([], tiny)  # WARMUP 2 of 12 steps: the bare range is 1..20
    (warm,) = space.parse("WARMUP", run.values, trial_steps=8)
    assert (warm.low, warm.high) == (1, 8)
    [problem] = _problems_with("WARMUP=1..10", run.values, 8)
    assert "a trial trains 8 steps" in problem and "high end at 8 or below" in problem


def _problems_with(text: str, values: dict, steps: int) -> list[str]:
    with pytest.raises(ConfigError) as err:
        space.parse(text, values, trial_steps=steps)
    return err.value.problems


def test_a_grid_that_would_give_configurations_different_budgets_is_refused(tiny):
    """AdamW tunes LR, Muon LR and MUON_LR: a grid of 8 gave AdamW 8 trials and Muon
    4 (2 x 2), and the matrix ran so; 9 trials make a full grid of each (9 and 3 x 3)."""
    from lib.matrix.grid import expand
    from lib.tune.stage import check

    both = "SET=OPTIMIZER_MODE_MULTIPLE=y OPTIMIZER_ENABLE_ADAMW=y OPTIMIZER_ENABLE_MUON=y"
    grid = [both, "TUNE=LR MUON_LR", "TUNE_FRACTION=70", "SET=MATRIX_TUNE_SAMPLER_GRID=y"]
    base, planned = expand([*grid, "TUNE_TRIALS=8"], tiny)
    with pytest.raises(ConfigError) as err:
        check(base, planned)
    text = str(err.value)
    assert "8 for 1 symbol (gpt2_adamw_none)" in text and "4 for 2 symbols (gpt2_muon_none)" in text
    assert "Give MATRIX_TUNE_TRIALS=9" in text, text
    check(*expand([*grid, "TUNE_TRIALS=9"], tiny))
    check(*expand([both, "TUNE=LR MUON_LR", "TUNE_FRACTION=70", "TUNE_TRIALS=8"], tiny))  # TPE
