"""The stage's plan without training: configurations from a matrix's runs, the
dry run's budget, `make tune`'s one configuration, the pruner and the record."""

from __future__ import annotations

import json

import optuna
import pytest

from lib.jobs.state import MatrixError
from lib.matrix import launch, plan
from lib.matrix.grid import expand
from lib.train.trial import build_pruner
from lib.tune import record, space, stage
from lib.tune.budget import Budget
from tests.lib.matrix.conftest import TINY, write_config

MATRIX = {**TINY, "OPTIMIZER_MODE": "multiple", "OPTIMIZER_ENABLE_MUON": "y", "MATRIX_SEEDS": "2"}


@pytest.fixture
def matrix(tmp_path):
    return write_config(tmp_path / ".config", {**MATRIX, "RESULTS_DIR": str(tmp_path / "r")})


def test_a_configuration_is_a_grid_point_without_its_seed(matrix):
    _, planned = expand(["TUNE=LR", "TUNE_FRACTION=70"], matrix)
    configs = stage.plan(planned)["configs"]
    assert configs == {
        "gpt2_adamw_none": {
            "overrides": ["OPTIMIZER_MODE=single", "OPTIMIZER=adamw", "PRUNING_MODE=none"],
            "runs": ["gpt2_adamw_none_s1", "gpt2_adamw_none_s2"],
        },
        "gpt2_muon_none": {
            "overrides": ["OPTIMIZER_MODE=single", "OPTIMIZER=muon", "PRUNING_MODE=none"],
            "runs": ["gpt2_muon_none_s1", "gpt2_muon_none_s2"],
        },
    }


def test_dry_run_states_the_tuning_budget_and_trains_nothing(matrix, tmp_path, capsys):
    args = ["TUNE=LR MUON_LR", "TUNE_TRIALS=3", "TUNE_FRACTION=70", "DRY_RUN=1"]
    assert launch.start(args, launch.ask, plan.show, path=matrix) == 0
    out = capsys.readouterr().out
    assert (
        "tuning first (MATRIX_TUNE): 2 configurations x 3 trials of 8 steps (70% of "
        "GPT2_MAX_ITERS) over LR MUON_LR: 6 trial runs, sampler tpe, pruner successive "
        "halving, seed 0" in out
    )
    assert "at most about" in out and "in all, tuning and runs: about" in out
    assert not (tmp_path / "r").exists()


def test_trials_too_short_for_two_evaluations_evaluate_more_often(tmp_path, capsys):
    # the docs' example on the default's shape: 20 % of 12 steps is 2, fewer than 2 x 4
    path = write_config(tmp_path / ".config", {**TINY, "RESULTS_DIR": str(tmp_path / "r")})
    args = ["TUNE=LR WARMUP", "TUNE_TRIALS=8", "DRY_RUN=1"]
    assert launch.start(args, launch.ask, plan.show, one=True, path=path) == 0
    out = capsys.readouterr().out
    assert "8 trials of 2 steps" in out
    assert "trials evaluate every 1 step (GPT2_EVAL_INTERVAL=4 would give a 2-step trial" in out
    base, _ = expand(["TUNE=LR WARMUP"], path)
    budget = Budget.from_run(base)
    assert "GPT2_EVAL_INTERVAL=1" in stage.trial_args(base, [], budget)


def test_make_tune_takes_one_configuration(matrix):
    with pytest.raises(MatrixError, match="makes 2 \\(gpt2_adamw_none, gpt2_muon_none\\)"):
        launch.start(
            ["MATRIX_TUNE=y", "TUNE_FRACTION=70"], launch.ask, plan.show, one=True, path=matrix
        )


def test_pruner_compares_trials_at_their_evaluation_steps(tmp_path):
    """Successive halving from the first evaluation, halving at each rung: a trial
    worse than the only other one at step 4 is pruned there, a better one is not."""
    study = optuna.create_study(
        storage=f"sqlite:///{tmp_path / 's.db'}",
        pruner=build_pruner("successive_halving", 4, 8),
    )
    first = study.ask()
    first.report(2.0, 4)
    assert not first.should_prune()
    study.tell(first, 1.9)
    worse, better = study.ask(), study.ask()
    worse.report(2.5, 4)
    better.report(1.5, 4)
    assert worse.should_prune() and not better.should_prune()


def test_record_matches_the_study_and_flags_a_best_value_at_the_edge(tmp_path):
    study = optuna.create_study(storage=f"sqlite:///{tmp_path / 's.db'}", study_name="c")
    (lr,) = space.parse("LR=1e-4..1e-2:log", {"LEARNING_RATE": 1e-3})
    for value, loss in ((1e-3, 2.0), (1.1e-4, 1.5)):
        study.enqueue_trial({"LR": value})
        trial = study.ask()
        lr.suggest(trial)
        study.tell(trial, loss)
    budget = Budget(3, 8, 0.5, "tpe", "none", 0, 4)
    rec = record.build(study, "c", "sqlite:///x", [lr], budget, 3, tmp_path)
    assert rec["best"] == {"value": 1.5, "params": {"LR": 1.1e-4}, "trial": 1}
    # 1.1e-4 is 2 % of two decades above the low end: the range was too narrow.
    assert rec["symbols"] == [
        {"name": "LR", "low": 1e-4, "high": 1e-2, "log": True, "best": 1.1e-4, "at_edge": True}
    ]
    assert [(t["state"], t["value"]) for t in rec["trials"]] == [
        ("complete", 2.0),
        ("complete", 1.5),
    ]
    assert rec["budget"]["trials"] == 3 and json.loads(json.dumps(rec)) == rec


@pytest.mark.parametrize("metric", ["val_loss", "val_loss_per_char"])
def test_a_trial_is_told_its_best_value_of_the_chosen_metric(tmp_path, metric):
    """TUNE_METRIC: a reused run's evaluations and its best, per token or per character."""
    from lib.tune import trial as trial_io

    study = optuna.create_study(storage=f"sqlite:///{tmp_path / 's.db'}", study_name="c")
    trial = study.ask()
    per_token = {"iters": [4, 8], "values": [6.0, 5.0]}
    per_char = {"iters": [4, 8], "values": [2.0, 1.6]}
    metrics = {"status": "completed", "best_val_loss": 5.0, "best_val_loss_per_char": 1.6}
    metrics |= {"val_loss": per_token, "val_loss_per_char": per_char}
    (tmp_path / "metrics.json").write_text(json.dumps(metrics))
    assert trial_io.tell(study, trial, tmp_path, {"state": "completed"}, metric) == "complete"
    (told,) = study.get_trials()
    series = per_char if metric == "val_loss_per_char" else per_token
    assert told.value == series["values"][-1]
    assert told.intermediate_values == dict(zip(series["iters"], series["values"]))
    assert Budget(3, 8, 0.5, "tpe", "none", 0, 4, metric).record()["metric"] == metric
