"""The tuning stage end to end (`make tune`, `make continue`): trials are runs
in their own processes reporting to an SQLite study; pruned trials stop early;
a killed search continues without repeating finished trials."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import optuna
import pytest

from lib.matrix.eta import Estimates, matrix_eta
from tests.lib.conftest import synthetic_corpus
from tests.lib.matrix.conftest import TINY, write_config
from tests.scripts.conftest import make, project  # noqa: F401 (fixture)

pytestmark = pytest.mark.slow

# 16 steps, an evaluation every 4; trials of 50 %: 8 steps, two evaluations to compare.
SHORT = {"GPT2_MAX_ITERS": "16", "GPT2_EVAL_INTERVAL": "4", "MATRIX_TUNE_FRACTION": "50"}


def _config(project: Path, tune: bool = True, **symbols: str) -> None:
    synthetic_corpus(project / "corpus.txt", lines=400)
    short = SHORT if tune else {k: v for k, v in SHORT.items() if "TUNE" not in k}
    write_config(
        project / ".config",
        {
            **TINY,
            "DATA_CUSTOM_PATH": "corpus.txt",
            "DATA_DIR": str(project / "data"),
            "MATRIX_TUNE": "y" if tune else "n",
            **short,
            **symbols,
        },
    )


def _latest(project: Path) -> Path:
    return (project / "results" / "latest").resolve()


def _tuning(project: Path) -> dict:
    (path,) = _latest(project).glob("tune/*/tuning.json")
    return json.loads(path.read_text())


def test_trials_report_to_the_study_and_poor_ones_are_pruned(project):
    _config(
        project,
        MATRIX_TUNE_SYMBOLS="LR=1e-5..3e-2:log",
        MATRIX_TUNE_TRIALS="5",
        MATRIX_TUNE_SEED="3",
    )
    dry = make(project, "tune", "DRY_RUN=1")
    assert dry.returncode == 0, dry.stdout + dry.stderr
    assert "1 configuration x 5 trials of 8 steps (50% of GPT2_MAX_ITERS)" in dry.stdout
    done = make(project, "tune", "YES=1")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    root, rec = _latest(project), _tuning(project)

    study = optuna.load_study(study_name=rec["study"], storage=rec["storage"])
    assert rec["storage"] == f"sqlite:///{root / 'tune' / 'study.db'}"
    by_number = {t.number: t for t in study.trials}
    assert [t["number"] for t in rec["trials"]] == sorted(by_number)
    for t in rec["trials"]:
        frozen = by_number[t["number"]]
        assert t["state"] == frozen.state.name.lower().replace("complete", "complete")
        assert t["params"] == frozen.params
        metrics = json.loads((root / t["run_dir"] / "metrics.json").read_text())
        reported = metrics["val_loss"]
        # What the trial process reported is what its metrics.json recorded.
        assert frozen.intermediate_values == {
            i: v for i, v in zip(reported["iters"], reported["values"]) if i
        }
        if t["state"] == "complete":
            assert t["value"] == metrics["best_val_loss"] == frozen.value
            assert metrics["iterations"] == t["steps"] == 8
    pruned = [t for t in rec["trials"] if t["state"] == "pruned"]
    assert pruned, f"no trial was pruned: {rec['trials']}"
    trial_runs = json.loads((root / "tune" / rec["config"] / "matrix.json").read_text())["runs"]
    for t in pruned:  # stopped early and cleanly: fewer steps, recorded as pruned, not failed
        metrics = json.loads((root / t["run_dir"] / "metrics.json").read_text())
        assert (
            metrics["pruned"] is True
            and metrics["iterations"] < 8 == rec["budget"]["steps_per_trial"]
        )
        assert trial_runs[Path(t["run_dir"]).name]["state"] == "completed"
    best = min((t for t in rec["trials"] if t["state"] == "complete"), key=lambda t: t["value"])
    assert rec["best"] == {
        "value": best["value"],
        "params": best["params"],
        "trial": best["number"],
    }
    assert rec["best"]["params"]["LR"] == study.best_params["LR"]

    # The final run trains at the best value, and says where it came from.
    ((run_id, entry),) = json.loads((root / "matrix.json").read_text())["runs"].items()
    assert entry["state"] == "completed"
    assert entry["tuned"]["tuning"] == f"tune/{rec['config']}/tuning.json"
    assert entry["tuned"]["values"] == rec["best"]["params"]
    config = (root / run_id / "config.txt").read_text()
    assert f'CONFIG_LEARNING_RATE="{best["params"]["LR"]:.6g}"' in config
    watch = make(project, "watch", "ONCE=1")
    assert f"tune {rec['config']}: 5 of 5 trials done ({len(pruned)} pruned" in watch.stdout
    # `make watch`'s ETA reads the same records: every trial done, one at a time on a CPU
    records = Estimates(root)
    records.prepare()
    matrix = json.loads((root / "matrix.json").read_text())
    eta = matrix_eta(matrix, records, lambda path: None, studies=records.studies(matrix))
    assert (eta.trials_done, eta.trials_total, eta.tuning_s) == (5, 5, 0.0)
    assert [s.at_once for s in records.studies(matrix)] == [1]


def test_killed_search_continues_without_repeating_finished_trials(project):
    _config(
        project,
        MATRIX_TUNE_SYMBOLS="LR",
        MATRIX_TUNE_TRIALS="3",
        MATRIX_TUNE_PRUNER="none",
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("MAKE")}
    proc = subprocess.Popen(
        ["make", "--no-print-directory", "-C", str(project), "tune", "YES=1"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline, second = time.time() + 240, None
    while time.time() < deadline and second is None:
        found = list((project / "results").glob("matrix_*/tune/*/trial-001/output.log"))
        second = found[0] if found else None
        time.sleep(0.2)
    assert second is not None, "the second trial never started"
    os.killpg(proc.pid, signal.SIGKILL)  # the search and its trial die at once
    proc.wait()
    before = _tuning(project)
    finished = {t["number"]: t for t in before["trials"] if t["state"] == "complete"}
    assert list(finished) == [0]
    first_metrics = _latest(project) / finished[0]["run_dir"] / "metrics.json"
    stamp = first_metrics.stat().st_mtime_ns

    resumed = make(project, "continue")
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr
    after = _tuning(project)
    states = {t["number"]: t["state"] for t in after["trials"]}
    assert states[0] == "complete" and states[1] == "fail"  # left running by the kill
    assert sum(s == "complete" for s in states.values()) == 3  # the budget, filled
    assert after["trials"][0] == {**finished[0], "steps": 8}  # not trained again
    assert first_metrics.stat().st_mtime_ns == stamp
    runs = json.loads((_latest(project) / "matrix.json").read_text())["runs"]
    assert {v["state"] for v in runs.values()} == {"completed"}


def _final_losses(project: Path) -> dict[str, float]:
    root = _latest(project)
    runs = json.loads((root / "matrix.json").read_text())["runs"]
    assert {v["state"] for v in runs.values()} == {"completed"}, runs
    return {r: json.loads((root / r / "metrics.json").read_text())["final_val_loss"] for r in runs}


def test_tuning_changes_the_adamw_against_muon_comparison(project):
    """At AdamW's learning rate Muon trails AdamW; with its own learning rate
    found by the same search budget it leads: the untuned comparison measured
    the shared learning rate, not the optimizers."""
    _config(
        project,
        tune=False,
        GPT2_MAX_ITERS="40",
        GPT2_EVAL_INTERVAL="10",
        OPTIMIZER_MODE="multiple",
        OPTIMIZER_ENABLE_MUON="y",
        MUON_LR="0.001",  # = LEARNING_RATE: both at AdamW's learning rate
    )
    untuned = make(project, "test-matrix", "YES=1")
    assert untuned.returncode == 0, untuned.stdout[-3000:] + untuned.stderr
    before = _final_losses(project)
    tuned = make(
        project,
        "test-matrix",
        "YES=1",
        "TUNE=MUON_LR=1e-3..3e-1:log",
        "TUNE_TRIALS=4",
        "TUNE_FRACTION=50",
        "SET=MATRIX_TUNE_SAMPLER=grid",
    )
    assert tuned.returncode == 0, tuned.stdout[-3000:] + tuned.stderr
    after = _final_losses(project)
    rec = json.loads((_latest(project) / "tune/gpt2_muon_none/tuning.json").read_text())
    assert sorted(t["params"]["MUON_LR"] for t in rec["trials"]) == pytest.approx(
        [1e-3, 6.69e-3, 4.48e-2, 3e-1], rel=1e-2
    )
    assert not (_latest(project) / "tune/gpt2_adamw_none").exists()  # MUON_LR: Muon only
    gap_before = before["gpt2_muon_none"] - before["gpt2_adamw_none"]
    gap_after = after["gpt2_muon_none"] - after["gpt2_adamw_none"]
    numbers = f"untuned {before}, tuned {after}, best {rec['best']}"
    assert after["gpt2_adamw_none"] == pytest.approx(before["gpt2_adamw_none"], abs=1e-6), numbers
    assert gap_before > 0, numbers  # at AdamW's learning rate, Muon is behind
    assert rec["best"]["params"]["MUON_LR"] > 0.001, numbers
    assert gap_after < gap_before - 0.1, numbers  # tuned, the comparison changes materially
    assert gap_after < 0, numbers  # and its ordering: tuned Muon is ahead of AdamW
