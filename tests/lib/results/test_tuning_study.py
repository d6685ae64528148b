"""The tuning records against the Optuna study they came from: a real SQLite
study made here, trial by trial as the records of tests/lib/results/tuned.py say."""

from __future__ import annotations

from pathlib import Path

import pytest

from lib.results import tuning
from tests.lib.results.tuned import STUDIES, tuned  # noqa: F401 (fixture)

optuna = pytest.importorskip("optuna")


def _study_db(root: Path, config: str, extra: list[tuple[str, float | None]] = ()) -> None:
    """The Optuna study of config in root/tune/study.db, trial by trial as its record says
    (and the extra (state, value) trials after them)."""
    from optuna.distributions import FloatDistribution
    from optuna.trial import TrialState, create_trial

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(
        study_name=config, direction="minimize", storage=f"sqlite:///{root / 'tune' / 'study.db'}"
    )
    states = {
        "complete": TrialState.COMPLETE,
        "pruned": TrialState.PRUNED,
        "fail": TrialState.FAIL,
        "running": TrialState.RUNNING,
    }
    dist = {"LEARNING_RATE": FloatDistribution(1e-4, 1e-2, log=True)}
    trials = [(t["state"], t["value"]) for t in STUDIES[config]["trials"]] + list(extra)
    for state, value in trials:
        done = state == "complete"
        study.add_trial(
            create_trial(
                state=states[state],
                value=value if done else None,
                params={"LEARNING_RATE": 1e-3},
                distributions=dist,
                intermediate_values={10: value} if state == "pruned" else None,
            )
        )


def test_the_sqlite_study_and_the_records_agree(tuned):
    for config in ("gpt2_adamw_none", "gpt2_muon_none"):
        _study_db(tuned, config)
    found = tuning.read(tuned)
    # gpt2_adamwspam_none has no study in the database: one line, no exception
    (missing,) = tuning.cross_check(tuned, found)
    assert "study 'gpt2_adamwspam_none' not readable" in missing
    assert "tune/gpt2_adamwspam_none/tuning.json not cross-checked" in missing


def test_a_study_ahead_of_its_record_is_a_warning(tuned):
    _study_db(tuned, "gpt2_adamw_none", extra=[("complete", 2.4), ("pruned", 3.3)])
    found = tuning.read(tuned)
    found.studies = [s for s in found.studies if s.config == "gpt2_adamw_none"]
    (line,) = tuning.cross_check(tuned, found)
    assert "tune/gpt2_adamw_none/tuning.json disagrees with study 'gpt2_adamw_none'" in line
    assert "complete trials 5 there, 4 here; pruned trials 2 there, 1 here" in line
    assert "best value 2.4 there, 2.6 here" in line
    # A record whose study lives on a server is not looked for in the local file.
    found.studies[0].storage = "postgresql://db.cluster/tuning"
    assert tuning.cross_check(tuned, found) == []
