"""knlp's SGD, Adam and AdamWAdv, its Adam-state tiering switches and its test
matrices, loaded from knlp-format files written for these tests."""

from __future__ import annotations

from lib.config.run_config import RunConfig, load_valid, typed_values
from lib.matrix.grid import combinations
from tests.lib.config.knlp_files import HEAD

SINGLE = [*HEAD[:4]]  # up to OPTIMIZER_MODE_SINGLE; the optimizer comes from each test
DENSE = ["CONFIG_PRUNING_MODE_NONE=y", 'CONFIG_DEVICE="cpu"']


def single(write_config, select: str, *lines: str) -> tuple[RunConfig, list[str]]:
    notes: list[str] = []
    path = write_config(*SINGLE, f"CONFIG_OPTIMIZER_SELECT_{select}=y", *DENSE, *lines)
    kconf = load_valid(path, notes)
    return RunConfig.from_values(typed_values(kconf)), notes


def test_knlps_sgd_is_momentum_09_with_its_runners_decay(write_config):
    run, notes = single(write_config, "SGD")
    assert (run.OPTIMIZER, run.SGD_MOMENTUM, run.WEIGHT_DECAY) == ("sgd", 0.9, 0.1)
    # knlp decays every tensor but biases and embeddings, whatever the optimizer
    assert run.WEIGHT_DECAY_PARAMS == "knlp"
    assert "knlp's SGD" in "\n".join(notes)


def test_knlps_adam_is_torch_adam_with_decay_01_and_no_amsgrad(write_config):
    # the Kconfig's ADV_* and ADAMW_* values do not reach knlp's Adam: its code decides
    run, _ = single(write_config, "ADAM", 'CONFIG_ADV_WEIGHT_DECAY="0.01"')
    assert run.OPTIMIZER == "adam"
    assert (run.ADAM_BETA1, run.ADAM_BETA2, run.ADAM_EPSILON) == (0.9, 0.999, 1e-8)
    assert (run.WEIGHT_DECAY, run.ADAM_AMSGRAD) == (0.1, False)


def test_knlps_adamwadv_is_adamw_with_amsgrad_and_says_knlps_trainer_lacks_it(write_config):
    run, notes = single(write_config, "ADAMWADV", "# CONFIG_ADV_USE_AMSGRAD is not set")
    assert (run.OPTIMIZER, run.ADAM_BETA2, run.WEIGHT_DECAY) == ("adamwadv", 0.999, 0.1)
    assert run.ADAM_AMSGRAD is None  # AdamWAdv has no switch: always on
    assert "gpt2/train.py does not offer it" in "\n".join(notes)


def test_tiering_switches_are_accepted_and_leave_the_run_as_it_is(write_config):
    tiering = [
        "CONFIG_ENABLE_HIERARCHICAL_TIERING=y",
        "CONFIG_TIERING_ADAM_STATE=y",
        "CONFIG_TIERING_REAL_OFFLOAD=y",
        'CONFIG_TIERING_HBM_THRESHOLD="0.2"',
        'CONFIG_TIERING_JSON_OUTPUT="hints.json"',
    ]
    plain, _ = single(write_config, "ADAMW")
    tiered, notes = single(write_config, "ADAMW", *tiering)
    assert tiered.values == plain.values
    text = "\n".join(notes)
    assert "reads no TIERING_* symbol" in text
    for name in ("ENABLE_HIERARCHICAL_TIERING", "TIERING_REAL_OFFLOAD", "TIERING_HBM_THRESHOLD"):
        assert name in text


MATRIX = [
    *HEAD[:3],
    "CONFIG_OPTIMIZER_MODE_MULTIPLE=y",
    "CONFIG_OPTIMIZER_ENABLE_SGD=y",
    "CONFIG_OPTIMIZER_ENABLE_ADAM=y",
    "CONFIG_OPTIMIZER_ENABLE_ADAMW=y",
    "CONFIG_OPTIMIZER_ENABLE_ADAMWADV=y",
    "CONFIG_OPTIMIZER_ENABLE_ADAMWSPAM=n",
    "CONFIG_OPTIMIZER_ENABLE_ADAMWPRUNE=n",
    "CONFIG_TEST_MATRIX_MODE=y",
    "CONFIG_TEST_OPTIMIZER_ENABLED_SGD=y",
    'CONFIG_TEST_PRUNING_METHODS="none"',
    *DENSE,
]


def matrix(write_config, *lines: str) -> tuple[RunConfig, list[str]]:
    notes: list[str] = []
    kconf = load_valid(write_config(*MATRIX, *lines), notes)
    return RunConfig.from_values(typed_values(kconf)), notes


def test_a_knlp_test_matrix_loads_as_this_projects_matrix_with_knlps_grid(write_config):
    run, notes = matrix(write_config)
    assert run.OPTIMIZER_MODE == "multiple" and run.OPTIMIZER is None
    cells = sorted(dict(o)["OPTIMIZER"] for o, _ in combinations(run))
    # knlp's runner: one dense run per enabled optimizer (PRUNING_MODE_NONE)
    assert cells == ["adam", "adamw", "adamwadv", "sgd"]
    assert (run.WEIGHT_DECAY, run.ADAM_AMSGRAD, run.SGD_MOMENTUM) == (0.1, False, 0.9)
    assert "TEST_OPTIMIZER_ENABLED_SGD, TEST_PRUNING_METHODS" in "\n".join(notes)


def test_a_matrix_whose_optimizers_need_different_values_gives_each_its_own(write_config):
    # knlp's AdamWSPAM uses AMSGrad, its AdamW and Adam do not: AMSGrad is AdamWSPAM's own
    spam = [line for line in MATRIX if "ENABLE_ADAMWSPAM" not in line]
    notes: list[str] = []
    kconf = load_valid(write_config(*spam, "CONFIG_OPTIMIZER_ENABLE_ADAMWSPAM=y"), notes)
    run = RunConfig.from_values(typed_values(kconf))
    assert run.ADAM_AMSGRAD is False and run.WEIGHT_DECAY == 0.1  # what most of them use
    assert run.MATRIX_OPTIMIZER_SETTINGS == "adamwspam:ADAM_AMSGRAD=y"
    assert "MATRIX_OPTIMIZER_SETTINGS" in "\n".join(notes)


def test_a_matrix_with_knlps_movement_pruning_or_dense_adamwprune_loads(write_config):
    run, notes = matrix(
        write_config,
        "CONFIG_PRUNING_MODE_MULTIPLE=y",
        "CONFIG_PRUNING_ENABLE_MAGNITUDE=n",
        "CONFIG_PRUNING_ENABLE_MOVEMENT=y",
    )
    # knlp's movement rule, on its linear ramp (movement's own setting in the matrix)
    assert run.PRUNING_MOVEMENT_KNLP is True
    assert run.MATRIX_PRUNING_SETTINGS == "movement:PRUNING_SCHEDULE=linear"
    methods = {dict(o).get("PRUNING_METHOD", "none") for o, _ in combinations(run)}
    assert "movement" in methods
    # AdamWPrune alone, dense (PRUNING_MODE_NONE): its base AdamW without pruning
    alone = [
        line.replace("=y", "=n") if "OPTIMIZER_ENABLE_" in line else line
        for line in MATRIX
        if "ENABLE_ADAMWPRUNE" not in line
    ]
    kconf = load_valid(write_config(*alone, "CONFIG_OPTIMIZER_ENABLE_ADAMWPRUNE=y"), [])
    run = RunConfig.from_values(typed_values(kconf))
    [(cell, _)] = combinations(run)
    assert (dict(cell)["OPTIMIZER"], dict(cell)["PRUNING_MODE"]) == ("adamwprune", "none")
    assert (run.WEIGHT_DECAY, run.ADAM_AMSGRAD) == (0.0, False)
