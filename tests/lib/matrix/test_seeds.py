"""MATRIX_SEEDS: every configuration of a matrix or sweep once per seed, as
TRAIN_SEED, with ids <configuration id>_s<seed>; what is refused; the plan."""

from __future__ import annotations

import dataclasses
import json

import pytest

from lib.config.kconfig import ConfigError
from lib.config.run_config import load_run_config
from lib.matrix import launch, plan, sweep
from lib.matrix.grid import expand, is_multiple, one_run
from lib.matrix.seeds import MAX_SEEDS, parse_seeds
from lib.train.trainer import Trainer

TWO_OPTIMIZERS = {
    "OPTIMIZER_MODE": "multiple",
    "OPTIMIZER_ENABLE_ADAMW": "y",
    "OPTIMIZER_ENABLE_ADAMWSPAM": "y",
}


def test_a_count_trains_every_configuration_once_per_seed(matrix_config):
    _, planned = expand([], matrix_config(**TWO_OPTIMIZERS, MATRIX_SEEDS="3"))
    assert [p.run_id for p in planned] == [
        "gpt2_adamw_none_s1",
        "gpt2_adamw_none_s2",
        "gpt2_adamw_none_s3",
        "gpt2_adamwspam_none_s1",
        "gpt2_adamwspam_none_s2",
        "gpt2_adamwspam_none_s3",
    ]
    assert [p.config.TRAIN_SEED for p in planned] == [1, 2, 3, 1, 2, 3]
    assert [p.config.OPTIMIZER for p in planned] == ["adamw"] * 3 + ["adamwspam"] * 3
    # the seed is the run's last override, after its configuration's own
    assert planned[4].overrides == [
        ("OPTIMIZER_MODE", "single"),
        ("OPTIMIZER", "adamwspam"),
        ("PRUNING_MODE", "none"),
        ("TRAIN_SEED", "2"),
    ]


@pytest.mark.parametrize("text", ["7 1 42", "7,1,42", " 7, 1 ,42 "])
def test_a_list_gives_those_seeds_in_its_order(matrix_config, text):
    _, planned = expand([], matrix_config(MATRIX_SEEDS=text))
    assert [p.run_id for p in planned] == [
        "gpt2_adamw_none_s7",
        "gpt2_adamw_none_s1",
        "gpt2_adamw_none_s42",
    ]
    assert [p.config.TRAIN_SEED for p in planned] == [7, 1, 42]


def test_seeds_from_the_command_line(matrix_config):
    base, planned = expand(["SET=MATRIX_SEEDS=0,5"], matrix_config())
    assert base.MATRIX_SEEDS == "0,5"
    assert [(p.run_id, p.config.TRAIN_SEED) for p in planned] == [
        ("gpt2_adamw_none_s0", 0),
        ("gpt2_adamw_none_s5", 5),
    ]


def test_seeds_multiply_an_ablation_and_the_seed_ends_the_id(matrix_config):
    _, planned = expand(
        [], matrix_config(MATRIX_ABLATION="LEARNING_RATE=1e-3,3e-3", MATRIX_SEEDS="2")
    )
    assert [p.run_id for p in planned] == [
        "gpt2_adamw_none_learning_rate1e-3_s1",
        "gpt2_adamw_none_learning_rate1e-3_s2",
        "gpt2_adamw_none_learning_rate3e-3_s1",
        "gpt2_adamw_none_learning_rate3e-3_s2",
    ]
    assert [(p.config.LEARNING_RATE, p.config.TRAIN_SEED) for p in planned] == [
        (1e-3, 1),
        (1e-3, 2),
        (3e-3, 1),
        (3e-3, 2),
    ]


def test_without_seeds_ids_and_the_configured_seed_are_unchanged(matrix_config):
    _, planned = expand(
        [], matrix_config(MATRIX_ABLATION="LEARNING_RATE=1e-3,3e-3", TRAIN_SEED="99")
    )
    assert [p.run_id for p in planned] == [
        "gpt2_adamw_none_learning_rate1e-3",
        "gpt2_adamw_none_learning_rate3e-3",
    ]
    assert {p.config.TRAIN_SEED for p in planned} == {99}
    assert not any(k == "TRAIN_SEED" for p in planned for k, _ in p.overrides)


@pytest.mark.parametrize(
    "text, match",
    [
        ("0", "a count of seeds is 1 to 100"),
        (str(MAX_SEEDS + 1), "a count of seeds is 1 to 100"),
        ("-1", "non-negative integers"),
        ("1 -2", "non-negative integers"),
        ("1.5", "non-negative integers"),
        ("three", "non-negative integers"),
        ("1 2 2 3 3", "listed twice: 2, 3"),
        (" ".join(str(s) for s in range(MAX_SEEDS + 1)), "101 seeds; at most 100"),
    ],
)
def test_a_bad_value_is_refused_naming_it(text, match):
    with pytest.raises(ConfigError, match=match) as err:
        parse_seeds(text)
    assert f'CONFIG_MATRIX_SEEDS="{text}"' in str(err.value)


def test_the_count_and_list_limits_are_inclusive():
    assert parse_seeds("") == parse_seeds("  ") == []
    assert parse_seeds("1") == [1]
    assert parse_seeds(str(MAX_SEEDS)) == list(range(1, MAX_SEEDS + 1))
    assert parse_seeds(" ".join(str(s) for s in range(MAX_SEEDS))) == list(range(MAX_SEEDS))


def test_a_bad_value_stops_the_matrix_before_anything_runs(matrix_config):
    with pytest.raises(ConfigError, match=r'CONFIG_MATRIX_SEEDS="4 4": listed twice: 4'):
        expand([], matrix_config(MATRIX_SEEDS="4 4"))
    # TRAIN_SEED's own range (0 to 2147483647) applies to each seed, as to any override
    with pytest.raises(
        ConfigError,
        match=r"TRAIN_SEED=2147483648 .*out of range; allowed: "
        r"0 to 2147483647 \(in 1 run",
    ):
        expand([], matrix_config(MATRIX_SEEDS="1 2147483648"))


@pytest.mark.parametrize(
    "symbols, args, source",
    [
        ({"MATRIX_ABLATION": "TRAIN_SEED=1,2"}, [], "the ablation list"),
        ({"MATRIX_ABLATION": "SEED=1,2"}, [], "the ablation list"),  # the alias
        ({}, ["SEED=5"], "the command line"),
        ({}, ["SET=TRAIN_SEED=5"], "the command line"),
    ],
)
def test_another_setter_of_train_seed_is_refused(matrix_config, symbols, args, source):
    with pytest.raises(
        ConfigError, match=f'CONFIG_MATRIX_SEEDS="2" sets TRAIN_SEED for every run, and {source}'
    ):
        expand(args, matrix_config(MATRIX_SEEDS="2", **symbols))


def test_seeds_multiply_sweep_points(matrix_config):
    points = sweep.parse("LEARNING_RATE=1e-3,3e-3").points()
    _, planned = expand([], matrix_config(MATRIX_SEEDS="1 2"), points)
    assert [p.run_id for p in planned] == [
        "gpt2_adamw_none_learning_rate1e-3_s1",
        "gpt2_adamw_none_learning_rate1e-3_s2",
        "gpt2_adamw_none_learning_rate3e-3_s1",
        "gpt2_adamw_none_learning_rate3e-3_s2",
    ]
    assert [p.config.TRAIN_SEED for p in planned] == [1, 2, 1, 2]
    random_points = sweep.parse("LEARNING_RATE=1e-4..1e-2:log", "random", trials=3, seed=1).points()
    _, planned = expand([], matrix_config(MATRIX_SEEDS="2"), random_points)
    assert len(planned) == 6 and [p.config.TRAIN_SEED for p in planned] == [1, 2] * 3
    assert planned[0].config.LEARNING_RATE == planned[1].config.LEARNING_RATE


def test_a_sweep_over_train_seed_works_as_before(matrix_config):
    points = sweep.parse("TRAIN_SEED=1,2,3").points()
    _, planned = expand([], matrix_config(), points)
    assert [p.run_id for p in planned] == [
        "gpt2_adamw_none_train_seed1",
        "gpt2_adamw_none_train_seed2",
        "gpt2_adamw_none_train_seed3",
    ]
    assert [p.config.TRAIN_SEED for p in planned] == [1, 2, 3]


def test_a_sweep_over_train_seed_with_seeds_names_both(matrix_config):
    points = sweep.parse("TRAIN_SEED=1,2,3").points()
    with pytest.raises(
        ConfigError,
        match=r'CONFIG_MATRIX_SEEDS="3" sets TRAIN_SEED for every '
        r"run, and the sweep sets TRAIN_SEED too",
    ):
        expand([], matrix_config(MATRIX_SEEDS="3"), points)


def test_seeds_alone_make_a_matrix(matrix_config):
    run = load_run_config([], matrix_config(MATRIX_SEEDS="3"))
    assert run.OPTIMIZER_MODE == "single" and run.PRUNING_MODE == "none"
    assert is_multiple(run)
    with pytest.raises(
        ConfigError, match='this .config asks for seeds \\(MATRIX_SEEDS="3"\\), which `make` cannot'
    ):
        one_run(run, "make")
    # seeds from the command line: the refusal says where they came from
    given = load_run_config(["SEEDS=3"], matrix_config())
    with pytest.raises(
        ConfigError, match="this .config with the command line's overrides asks for seeds"
    ):
        one_run(given, "make")
    assert not is_multiple(dataclasses.replace(run, MATRIX_SEEDS=""))
    assert not is_multiple(dataclasses.replace(run, MATRIX_SEEDS="  "))


def test_the_plan_counts_configurations_and_seeds(matrix_config, capsys):
    base, planned = expand([], matrix_config(**TWO_OPTIMIZERS, MATRIX_SEEDS="1 7 42"))
    plan.show(base, planned)
    out = capsys.readouterr().out
    assert "6 runs (2 configurations x 3 seeds: 1 7 42)" in out
    assert "gpt2_adamwspam_none_s42" in out and "TRAIN_SEED=42" in out
    base, planned = expand([], matrix_config(**TWO_OPTIMIZERS, MATRIX_SEEDS=""))
    plan.show(base, planned)
    out = capsys.readouterr().out
    assert "\n2 runs, about" in out and "seed" not in out


def test_two_seeds_train_differently_and_one_seed_reproduces(matrix_config):
    """As the runner trains a matrix run: from the config.txt in its folder."""
    base, planned = expand([], matrix_config(MATRIX_SEEDS="2"))
    state = launch.create(base, planned, [])
    record = json.loads((state.root / "matrix.json").read_text())["runs"]
    assert {r: v["overrides"][-1] for r, v in record.items()} == {
        "gpt2_adamw_none_s1": "TRAIN_SEED=1",
        "gpt2_adamw_none_s2": "TRAIN_SEED=2",
    }

    def val_losses(run_id, folder):
        run = load_run_config([], state.root / run_id / "config.txt")
        folder.mkdir(exist_ok=True)
        return Trainer(run, folder, log=lambda _: None).train()["val_loss"]["values"]

    s1 = val_losses("gpt2_adamw_none_s1", state.root / "gpt2_adamw_none_s1")
    s2 = val_losses("gpt2_adamw_none_s2", state.root / "gpt2_adamw_none_s2")
    again = val_losses("gpt2_adamw_none_s1", state.root / "s1-again")
    assert len(s1) == len(s2) == 3
    assert all(abs(a - b) > 1e-4 for a, b in zip(s1, s2))  # another seed, another run
    assert again == s1  # the same seed, the same run on a CPU
