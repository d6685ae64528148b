"""SCALE_ITERS=N: the run's length and every length tied to it, scaled together."""

from __future__ import annotations

import pytest

from lib.config.kconfig import ConfigError
from lib.config.run_config import load_run_config
from lib.matrix.grid import expand
from tests.lib.matrix.conftest import write_config

# The default's schedule (2000 steps, warmup 100, evaluations every 250) with a pruning ramp.
LONG = {
    "GPT2_DATASET_CUSTOM": "y",
    "DATA_TOKENIZER_CHAR": "y",
    "GPT2_N_LAYER": "1",
    "GPT2_N_HEAD": "2",
    "GPT2_N_EMBD": "32",
    "GPT2_BLOCK_SIZE": "32",
    "GPT2_MAX_ITERS": "2000",
    "GPT2_WARMUP_STEPS": "100",
    "GPT2_EVAL_INTERVAL": "250",
    "TRAIN_LOG_INTERVAL": "10",
    "DEVICE_CPU": "y",
}
PRUNED = {
    **LONG,
    "PRUNING_MODE_SINGLE": "y",
    "PRUNING_METHOD": "magnitude",
    "PRUNING_WARMUP": "400",
    "PRUNING_RAMP_END": "1600",
    "PRUNING_FREQUENCY": "20",
}


@pytest.fixture
def long(tmp_path):
    return write_config(tmp_path / ".config", LONG)


def test_scale_iters_scales_warmup_and_evaluations_and_says_so(long):
    run = load_run_config(["SCALE_ITERS=150"], long)
    assert (run.GPT2_MAX_ITERS, run.GPT2_WARMUP_STEPS, run.GPT2_EVAL_INTERVAL) == (150, 8, 19)
    assert run.TRAIN_LOG_INTERVAL == 1  # 10 x 0.075 rounds to 1, never to 0
    assert run.derived()["evaluations"] == 8  # as many points as the 2000-step run's 8
    [note] = run.notes
    assert note.startswith("SCALE_ITERS=150: GPT2_MAX_ITERS 2000 -> 150 (x0.075)")
    assert "GPT2_WARMUP_STEPS 100 -> 8" in note and "GPT2_EVAL_INTERVAL 250 -> 19" in note
    assert note in run.describe()
    # recorded: the run's config.txt names the override and holds the scaled values
    assert "SCALE_ITERS=150" in run.config_text
    assert "CONFIG_GPT2_WARMUP_STEPS=8\n" in run.config_text


def test_a_length_given_beside_it_is_kept(long):
    run = load_run_config(["SCALE_ITERS=150", "WARMUP=30"], long)
    assert (run.GPT2_WARMUP_STEPS, run.GPT2_EVAL_INTERVAL) == (30, 19)
    assert "kept as given: GPT2_WARMUP_STEPS" in run.notes[0]


def test_plain_max_iters_scales_nothing(long):
    run = load_run_config(["MAX_ITERS=150", "WARMUP=10"], long)
    assert (run.GPT2_EVAL_INTERVAL, run.notes) == (250, ())


@pytest.mark.parametrize(
    "args, message",
    [
        (["SCALE_ITERS=150", "MAX_ITERS=100"], "both set the run's length: give one"),
        (["SCALE_ITERS=0"], "SCALE_ITERS=0: out of range; allowed: 1 to 100000000"),
        (["SCALE_ITERS=abc"], "SCALE_ITERS=abc: not an integer; allowed: 1 to 100000000"),
    ],
)
def test_bad_scale_iters_is_refused(long, args, message):
    with pytest.raises(ConfigError, match=message):
        load_run_config(args, long)


@pytest.mark.parametrize("value", [" 150", "150 ", "+150", "1_50", "١٥٠", "0x96", "150.0"])
def test_scale_iters_takes_the_integers_max_iters_takes(long, value):
    """Python's int() reads " 150", "+150", "1_50" and Arabic-Indic "١٥٠" as 150;
    Kconfig's syntax is ASCII digits: both are refused, worded alike."""
    for name in ("MAX_ITERS", "SCALE_ITERS"):
        with pytest.raises(ConfigError) as refused:
            load_run_config([f"{name}={value}"], long)
        [problem] = refused.value.problems
        assert problem.startswith(f"override {name}={value}: "), problem
        assert "not an integer; allowed: 1 to 100000000" in problem, problem
    assert load_run_config(["SCALE_ITERS=0150"], long).GPT2_MAX_ITERS == 150


def test_a_scale_iters_of_5000_digits_is_out_of_range_and_shown_cut(long):
    with pytest.raises(ConfigError) as refused:
        load_run_config(["SCALE_ITERS=" + "9" * 5000], long)
    [problem] = refused.value.problems
    assert problem == (
        f"override SCALE_ITERS={'9' * 40}… (5,000 characters): out of range; allowed: "
        f"1 to 100000000 (the run's new length in steps)"
    )


def test_pruning_ramp_scales_and_a_pruned_matrix_cut_short_is_not_refused(tmp_path):
    path = write_config(tmp_path / ".config", PRUNED)
    run = load_run_config(["SCALE_ITERS=150"], path)
    assert (run.PRUNING_WARMUP, run.PRUNING_RAMP_END, run.PRUNING_FREQUENCY) == (30, 120, 2)
    # MAX_ITERS=150 alone leaves the ramp at 1600: refused, and the refusal names SCALE_ITERS
    with pytest.raises(ConfigError, match="SCALE_ITERS=150 in place of MAX_ITERS="):
        load_run_config(["MAX_ITERS=150"], path)
    ramp = {k: PRUNED[k] for k in ("PRUNING_WARMUP", "PRUNING_RAMP_END", "PRUNING_FREQUENCY")}
    matrix = write_config(
        tmp_path / "matrix.config",
        {**LONG, "PRUNING_MODE_MULTIPLE": "y", "PRUNING_ENABLE_MAGNITUDE": "y", **ramp},
    )
    with pytest.raises(ConfigError, match="PRUNING_RAMP_END=1600 is past"):
        expand(["MAX_ITERS=150"], matrix)
    _, planned = expand(["SCALE_ITERS=150"], matrix)
    pruned = [p.config for p in planned if p.config.PRUNING_RAMP_END is not None]
    assert pruned and {(c.GPT2_MAX_ITERS, c.PRUNING_RAMP_END) for c in pruned} == {(150, 120)}


def test_a_run_too_short_for_the_ramp_names_the_shortest_scale_that_keeps_it(tmp_path):
    """Warmup 400 and ramp end 1600 of 2000 both round to 1 at SCALE_ITERS=1: the
    refusal is the scaling's, with the shortest length whose ramp keeps a step."""
    path = write_config(tmp_path / ".config", PRUNED)
    with pytest.raises(ConfigError) as err:
        load_run_config(["SCALE_ITERS=1"], path)
    text = str(err.value)
    assert "SCALE_ITERS=1 is too short for this configuration" in text, text
    assert "PRUNING_WARMUP 400 -> 1 and PRUNING_RAMP_END 1600 -> 1" in text, text
    shortest = int(text.split("give SCALE_ITERS=")[1].split()[0])
    run = load_run_config([f"SCALE_ITERS={shortest}"], path)
    assert run.PRUNING_WARMUP < run.PRUNING_RAMP_END <= run.GPT2_MAX_ITERS == shortest
    with pytest.raises(ConfigError, match="too short"):
        load_run_config([f"SCALE_ITERS={shortest - 1}"], path)
    # a ramp given beside it is the user's, judged by the pruning rule as typed
    run = load_run_config(["SCALE_ITERS=1", "SET=PRUNING_WARMUP=0 PRUNING_RAMP_END=1"], path)
    assert (run.PRUNING_WARMUP, run.PRUNING_RAMP_END) == (0, 1)
