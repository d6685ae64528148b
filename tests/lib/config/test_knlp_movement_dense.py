"""knlp's movement pruning (PRUNING_MOVEMENT_KNLP) and AdamWPrune's dense cells
(PRUNING_MODE_NONE / PRUNING_ENABLE_NONE_ADAMWPRUNE): knlp-format files written for
these tests load as the runs knlp's runner trains, and check.py's comparison shows a
run that differs."""

from __future__ import annotations

import pytest

from lib.config.run_config import RunConfig, typed_values
from lib.knlpcheck.optim import knlp_optimizer, our_matrix
from lib.knlpcheck.prune import knlp_movement, our_pruning
from lib.optim import base_optimizer
from lib.train.naming import run_tag
from tests.lib.config.knlp_files import HEAD
from tests.lib.config.test_knlp_matrix_runs import GRID

MOVEMENT_GRID = [
    line for line in GRID if "ENABLE_MOVEMENT" not in line and "ENABLE_NONE" not in line
]


def test_adamwprune_dense_file_is_its_base_adamw_without_pruning(write_config):
    from lib.config.run_config import load_valid

    lines = [
        *HEAD[:4],
        "CONFIG_OPTIMIZER_SELECT_ADAMWPRUNE=y",
        "CONFIG_PRUNING_MODE_NONE=y",
        'CONFIG_DEVICE="cpu"',
    ]
    run = RunConfig.from_values(typed_values(load_valid(write_config(*lines), [])))
    assert (run.OPTIMIZER, run.PRUNING_MODE) == ("adamwprune", "none")
    assert base_optimizer(run.optim) == "adamw"
    assert run_tag(run) == "gpt2_adamwprune_none"
    # lib/optimizers.py: AdamWPrune's base AdamW with decay 0 and no AMSGrad
    assert (run.WEIGHT_DECAY, run.ADAM_AMSGRAD) == (0.0, False)
    assert (run.ADAM_BETA1, run.ADAM_BETA2, run.ADAM_EPSILON) == (0.9, 0.999, 1e-8)


def test_knlp_matrix_with_movement_and_dense_cells(write_config, tmp_path):
    base, planned = planned_runs_movement(write_config, tmp_path)
    runs = {p.run_id: p.config for p in planned}
    assert sorted(runs) == [
        "gpt2_adamw_magnitude_50",
        "gpt2_adamw_magnitude_90",
        "gpt2_adamw_movement_50",
        "gpt2_adamw_movement_90",
        "gpt2_adamw_none",
        "gpt2_adamwprune_bitter7_state_50",
        "gpt2_adamwprune_bitter7_state_90",
        "gpt2_adamwprune_none",
        "gpt2_adamwspam_magnitude_50",
        "gpt2_adamwspam_magnitude_90",
        "gpt2_adamwspam_movement_50",
        "gpt2_adamwspam_movement_90",
        "gpt2_adamwspam_none",
    ]
    movement, magnitude = runs["gpt2_adamw_movement_50"], runs["gpt2_adamw_magnitude_50"]
    assert movement.PRUNING_MOVEMENT_KNLP and movement.PRUNING_SCHEDULE == "linear"
    assert (movement.PRUNING_WARMUP, movement.PRUNING_RAMP_END, movement.PRUNING_FREQUENCY) == (
        201,
        3001,
        1,
    )
    assert magnitude.PRUNING_SCHEDULE == "cubic_late"
    dense = runs["gpt2_adamwprune_none"]
    assert (dense.PRUNING_MODE, dense.WEIGHT_DECAY, dense.ADAM_AMSGRAD) == ("none", 0.0, False)
    # the per-run comparison: knlp's side from lib/knlpcheck/prune.py and optim.py
    ours = our_matrix(base, planned)
    for key, value in knlp_movement(0.5, 200, 4000).items():
        assert ours[f"run adamw movement 0.5: {key}"] == value, key
    for key, value in knlp_optimizer("adamwprune").items():
        assert ours[f"run adamwprune none 0: {key}"] == value, key


def planned_runs_movement(write_config, tmp_path):
    from lib.config.run_config import config_text, load_valid
    from lib.matrix.grid import expand

    kconf = load_valid(
        write_config(
            *MOVEMENT_GRID, "CONFIG_PRUNING_ENABLE_MOVEMENT=y", "CONFIG_PRUNING_ENABLE_NONE=y"
        ),
        [],
    )
    path = tmp_path / "movement.config"
    path.write_text(config_text(kconf))
    return expand([], path)


@pytest.mark.parametrize("knlp_rule", [True, False])
def test_movement_comparison_shows_a_rule_or_schedule_that_differs(write_config, knlp_rule):
    from lib.config.run_config import load_valid

    lines = [
        *HEAD[:4],
        "CONFIG_OPTIMIZER_SELECT_ADAMW=y",
        "CONFIG_PRUNING_MODE_SINGLE=y",
        "CONFIG_PRUNING_SELECT_MOVEMENT=y",
        'CONFIG_TARGET_SPARSITY="0.7"',
        "CONFIG_PRUNING_WARMUP=100",
        "CONFIG_GPT2_MAX_ITERS=3500",
        'CONFIG_DEVICE="cpu"',
    ]
    run = RunConfig.from_values(typed_values(load_valid(write_config(*lines), [])))
    theirs = knlp_movement(0.7, 100, 3500)
    assert {k: our_pruning(run)[k] for k in theirs} == theirs
    # without knlp's rule, or on the cubic schedule, the comparison differs
    changed = {"PRUNING_MOVEMENT_KNLP": False} if knlp_rule else {"PRUNING_SCHEDULE": "cubic"}
    other = our_pruning(RunConfig.from_values({**run.values, **changed}))
    differ = {k for k in theirs if other[k] != theirs[k]}
    if knlp_rule:
        assert differ == {"prune score", "masks only grow", "mask updates"}
    else:
        assert differ == {"prune steps"}
