"""A tuning trial's run reports its evaluations to the study and stops when pruned;
a run without trial.json does neither (lib/train/trial.py)."""

from __future__ import annotations

import json

import optuna

from lib.train.trial import FILE, TrialReport, build_pruner, storage


def test_a_run_without_trial_json_reports_nothing(tmp_path):
    report = TrialReport.from_run_dir(tmp_path, is_main=True)
    assert not report.active and report.report(4, 1.0, 0.3) is None and report.record() == {}


def test_a_trial_reports_to_its_study_and_is_pruned_when_worse(tmp_path):
    url = f"sqlite:///{tmp_path / 'study.db'}"
    pruner = build_pruner("successive_halving", 4, 8)
    study = optuna.create_study(storage=storage(url), study_name="c", pruner=pruner)
    done = study.ask()
    done.report(2.0, 4)
    assert not done.should_prune()  # what a trial's run asks at each evaluation
    study.tell(done, 2.0)
    trial = study.ask()
    spec = {"storage": url, "study": "c", "trial_id": trial._trial_id, "number": trial.number}
    spec |= {"pruner": "successive_halving", "min_resource": 4, "max_resource": 8}
    (tmp_path / FILE).write_text(json.dumps(spec))

    report = TrialReport.from_run_dir(tmp_path, is_main=True)
    assert report.report(0, 9.0, 3.0) is None  # step 0: before training, not an evaluation
    reason = report.report(4, 3.0, 1.0)
    assert reason is not None and "pruned by the tuning study's successive_halving" in reason
    assert report.record() == {"pruned": True, "pruned_at": 4}
    (frozen,) = [t for t in study.get_trials() if t.number == 1]
    assert frozen.intermediate_values == {4: 3.0}  # what the run reported, in the study
    other_rank = TrialReport.from_run_dir(tmp_path, is_main=False)
    assert other_rank.active and other_rank.report(4, 3.0, 1.0) is None  # rank 0 alone asks


class _Pruning:
    """A study trial whose pruner would stop it at any step."""

    def __init__(self):
        self.reported: dict[int, float] = {}

    def report(self, value: float, step: int) -> None:
        self.reported[step] = value

    def should_prune(self) -> bool:
        return True


def test_the_last_evaluation_never_prunes():
    """A trial that trained all its steps is complete, however it compares."""
    spec = {"pruner": "hyperband", "min_resource": 4, "max_resource": 8, "number": 2}
    report = TrialReport(spec)
    report._trial = trial = _Pruning()
    assert report.report(8, 3.0, 1.0) is None and report.record()["pruned"] is False
    assert "pruned by the tuning study's hyperband pruner at step 4" in str(
        report.report(4, 3.0, 1.0)
    )
    assert trial.reported == {8: 3.0, 4: 3.0}  # both reported to the study


def test_a_per_character_study_is_told_the_loss_per_character():
    """Trials of different tokenizers compare only per character (TUNE_METRIC)."""
    spec = {"pruner": "none", "min_resource": 4, "max_resource": 8, "number": 0}
    per_token, per_char = (
        TrialReport(dict(spec)),
        TrialReport({**spec, "metric": "val_loss_per_char"}),
    )
    per_token._trial, per_char._trial = _Pruning(), _Pruning()
    for report in (per_token, per_char):
        report.report(8, 4.5, 1.5)
    assert per_token._trial.reported == {8: 4.5} and per_char._trial.reported == {8: 1.5}
