"""Runs never trained twice: a matrix links an earlier completed run with the same
fingerprint instead of training it (lib/jobs/reuse.py), unless told not to.

In-process tests replace the training process by a stand-in that writes the
metrics.json the trainer writes (its status and fingerprint) and counts the
processes started; one test checks the real trainer records that fingerprint,
and a slow one goes through make with real training."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest

from lib.config.run_config import load_run_config
from lib.data.prepared import data_dir, ensure_prepared
from lib.jobs import reuse
from lib.jobs.runner import Runner
from lib.jobs.state import MatrixError, MatrixState
from lib.matrix import launch, plan
from lib.matrix.grid import expand
from lib.results.collect import load_rows
from lib.results.tables import markdown
from lib.run import fingerprint as fp
from lib.train.trainer import Trainer
from tests.lib.conftest import synthetic_corpus
from tests.lib.matrix.conftest import TINY, write_config
from tests.scripts.conftest import make, project  # noqa: F401 (fixture)

CLEAN = {"commit": "a" * 40, "dirty": False}
TWO = {
    "OPTIMIZER_MODE": "multiple",
    "OPTIMIZER_ENABLE_ADAMW": "y",
    "OPTIMIZER_ENABLE_ADAMWSPAM": "y",
}
RUNS = ["gpt2_adamw_none", "gpt2_adamwspam_none"]


class StandIn:
    """Runner._launch without training: what the trainer would leave in metrics.json."""

    def __init__(self):
        self.started: list[str] = []
        self.status, self.code, self.exit_code = "completed", CLEAN, 0

    def __call__(self, runner: Runner, run_dir: Path, slot: dict) -> int:
        self.started.append(run_dir.name)
        run = load_run_config(list(runner.extra_args), run_dir / "config.txt")
        ensure_prepared(run.data, log=lambda _: None)
        (run_dir / "metrics.json").write_text(
            json.dumps(
                {
                    "status": self.status,
                    "iterations": 12,
                    "wall_time_s": 90.0,
                    "best_val_loss": 2.5,
                    "val_loss": {"iters": [12], "values": [2.5]},
                    "fingerprint": fp.fingerprint(run, self.code),
                }
            )
        )
        return self.exit_code


@pytest.fixture
def standin(monkeypatch):
    monkeypatch.setattr(fp, "code_version", lambda root=None: CLEAN)
    fake = StandIn()
    monkeypatch.setattr(Runner, "_launch", lambda self, run_dir, slot: fake(self, run_dir, slot))
    return fake


def _start(path: Path, *args: str, name: str | None = None) -> MatrixState:
    """Plan and train a matrix as `make test-matrix YES=1` does; rename it (two
    matrices started within a second would share a name)."""
    assert launch.start(["YES=1", *args], lambda _: True, plan.show, path=path) in (0, 1)
    root = (Path(load_run_config([], path).RESULTS_DIR) / "latest").resolve()
    if name:
        root = root.rename(root.parent / name)
    return MatrixState.load(root)


def test_a_second_matrix_reuses_what_the_first_trained(matrix_config, standin, capsys):
    path = matrix_config(**TWO)
    first = _start(path, name="first")
    assert standin.started == RUNS
    capsys.readouterr()

    second = _start(path)
    assert standin.started == RUNS  # no training process started
    out = capsys.readouterr().out
    for run_id in RUNS:
        entry = second.runs[run_id]
        assert entry["state"] == "completed" and entry["reused_from"] == f"first/{run_id}"
        assert (second.root / run_id).is_symlink()
        assert (second.root / run_id).resolve() == (first.root / run_id).resolve()
        assert f"{run_id}: reused first/{run_id}" in out
    assert "2 completed (2 of them reused)" in out

    rows, _, baselines = load_rows(second.root)
    assert [(r.run_id, r.status, r.reused_from, r.best_loss) for r in rows] == [
        (r, "completed", f"first/{r}", 2.5) for r in RUNS
    ]
    table = markdown(rows, baselines)
    assert table.count("| reused |") == 2 and "| completed |" not in table


def test_the_dry_run_shows_reused_runs_and_the_time_saved(matrix_config, standin, capsys):
    path = matrix_config(**TWO)
    _start(path, "SET=TRAIN_SEED=5", name="first")  # both runs, with seed 5
    capsys.readouterr()
    base, planned = expand(["DRY_RUN=1"], path)
    plan.show(base, planned)
    out = capsys.readouterr().out
    assert "reused" not in out  # seed 1 (the .config's) was never trained
    base, planned = expand(["DRY_RUN=1", "SET=TRAIN_SEED=5"], path)
    plan.show(base, planned)
    lines = capsys.readouterr().out.splitlines()
    reused = [line for line in lines if "reused" in line]
    assert len(reused) == 3 and "<- first/gpt2_adamw_none" in reused[0]
    assert "<- first/gpt2_adamwspam_none" in reused[1]
    estimates = [plan._estimates(p.config, [])[1] for p in planned]
    seconds = sum(90.0 if s is None else s.seconds for s in estimates)  # else the wall time
    assert reused[2].startswith("2 runs reused from earlier runs with the same fingerprint")
    assert f"saving about {plan._duration(seconds)}" in reused[2]
    assert "about 0 s one after another" in "\n".join(lines)


def test_reuse_off_or_test_rerun_trains_again(matrix_config, standin, capsys):
    path = matrix_config(**TWO)
    _start(path, name="first")
    second = _start(path, "REUSE=n", name="second")
    assert standin.started == RUNS * 2
    assert not any(v.get("reused_from") for v in second.runs.values())
    third = _start(path)
    assert standin.started == RUNS * 2 and (third.root / RUNS[0]).is_symlink()

    with pytest.raises(MatrixError, match=f"did you mean '{RUNS[0]}'"):
        launch.rerun(third.root, RUNS[0] + "e", [])
    assert launch.rerun(third.root, RUNS[0], []) == 0
    assert standin.started == RUNS * 2 + [RUNS[0]]
    entry = MatrixState.load(third.root).runs[RUNS[0]]
    assert entry["state"] == "completed" and entry["reused_from"] is None
    assert not (third.root / RUNS[0]).is_symlink()
    assert [p.is_symlink() for p in third.root.glob(f"{RUNS[0]}.prev-*")] == [True]


@pytest.mark.parametrize(
    "status, exit_code", [("failed", 1), ("diverged", 3), ("running", 0), ("stopped", 75)]
)
def test_an_unfinished_or_failed_run_is_never_reused(matrix_config, standin, status, exit_code):
    path = matrix_config(**TWO)
    standin.status, standin.exit_code = status, exit_code
    _start(path, name="first")
    standin.status, standin.exit_code = "completed", 0
    _start(path)
    assert standin.started == RUNS * 2


def test_a_completed_run_its_matrix_records_as_failed_is_not_reused(matrix_config, standin):
    path = matrix_config(**TWO)
    first = _start(path, name="first")
    first.update(RUNS[0], state="failed", error="crashed after its last record")
    second = _start(path)
    assert standin.started == RUNS + [RUNS[0]]
    assert second.runs[RUNS[1]]["reused_from"] == f"first/{RUNS[1]}"


def test_other_data_prevents_reuse(matrix_config, standin, capsys):
    path = matrix_config(**TWO)
    _start(path, name="first")
    run = load_run_config([], path)
    shutil.rmtree(data_dir(run.data))  # the corpus changed and was prepared again
    capsys.readouterr()
    plan.show(*expand([], path))  # before it is prepared, the plan cannot tell
    out = capsys.readouterr().out
    assert "reuse: 2 run(s) not checked, their data is not prepared yet" in out
    assert " reused " not in out
    synthetic_corpus(Path(run.DATA_CUSTOM_PATH), lines=400, seed=7)
    ensure_prepared(run.data, log=lambda _: None)
    _start(path)
    assert standin.started == RUNS * 2


def test_uncommitted_changes_prevent_reuse_both_ways(matrix_config, standin, monkeypatch, capsys):
    path = matrix_config(**TWO)
    standin.code = {**CLEAN, "dirty": True}  # trained from a dirty tree
    _start(path, name="first")
    standin.code = CLEAN
    _start(path, name="second")
    assert standin.started == RUNS * 2
    monkeypatch.setattr(fp, "code_version", lambda root=None: {**CLEAN, "dirty": True})
    capsys.readouterr()
    _start(path)  # clean runs exist now, but this tree is dirty
    assert standin.started == RUNS * 3
    assert reuse.DIRTY in capsys.readouterr().out


def test_single_runs_are_found_and_a_begun_run_is_resumed(matrix_config, standin):
    path = matrix_config(**TWO)
    for optimizer in ("adamw", "adamwspam"):  # as `make RUN_NAME=... TRACKER=...` leaves them
        run = load_run_config(
            [
                "OPTIMIZER_MODE=single",
                f"OPTIMIZER={optimizer}",
                f"RUN_NAME=mine-{optimizer}",
                "TRACKER=tensorboard",
                "SET=TRAIN_LOG_INTERVAL=1",
            ],
            path,
        )
        single = Path(run.RESULTS_DIR) / run.RUN_NAME
        single.mkdir(parents=True)
        (single / "config.txt").write_text(run.config_text)
        ensure_prepared(run.data, log=lambda _: None)
        (single / "metrics.json").write_text(
            json.dumps({"status": "completed", "fingerprint": fp.fingerprint(run, CLEAN)})
        )

    base, planned = expand([], path)
    state = launch.create(base, planned, [])
    (state.root / RUNS[0] / "ckpt_latest.pt").write_bytes(b"begun")  # resumed, not replaced
    assert launch.resume(state.root, [], retry_failed=False) == 0
    state = MatrixState.load(state.root)
    assert standin.started == [RUNS[0]] and not (state.root / RUNS[0]).is_symlink()
    assert state.runs[RUNS[1]]["reused_from"] == "mine-adamwspam"


def test_a_written_cluster_script_is_replaced_but_a_submitted_job_is_kept(matrix_config, standin):
    path = matrix_config(**TWO)
    _start(path, name="first")
    assert (
        launch.start(["DRY_RUN=1", "EXECUTOR=slurm"], lambda _: True, plan.show, path=path) == 0
    )  # writes every run's slurm.sh, submits nothing
    state = MatrixState.load((Path(load_run_config([], path).RESULTS_DIR) / "latest").resolve())
    assert all((state.root / r / "slurm.sh").is_file() for r in RUNS)
    state.update(RUNS[0], slurm_job="1001")  # as if submitted: its job would train the link
    configs = {r: load_run_config([], state.root / r / "config.txt") for r in RUNS}
    assert reuse.apply(state, configs, list(RUNS)) == [RUNS[0]]
    assert (state.root / RUNS[1]).is_symlink() and not (state.root / RUNS[0]).is_symlink()


def test_a_matrix_run_and_a_single_run_of_one_configuration_match(matrix_config, tmp_path):
    """Over real symbol values: a seeded matrix run and `make` with that seed,
    another run name, trackers and log interval share the hash; another seed,
    learning rate or step count does not."""
    path = matrix_config(**TWO, MATRIX_SEEDS="3", MATRIX_PARALLEL_JOBS="2")
    base, planned = expand([], path)
    matrix_run = next(p.config for p in planned if p.run_id == "gpt2_adamwspam_none_s2")
    single_config = write_config(
        tmp_path / "single" / ".config",
        {
            **TINY,
            "DATA_CUSTOM_PATH": matrix_run.DATA_CUSTOM_PATH,
            "DATA_DIR": matrix_run.DATA_DIR,
            "OPTIMIZER": "adamwspam",
            "TRAIN_SEED": "2",
            "RUN_NAME": "by-hand",
            "TRAIN_LOG_INTERVAL": "1",
            "TRACKER_TENSORBOARD": "y",
            "RESULTS_DIR": str(tmp_path),
        },
    )

    def digest(*args: str) -> str:
        return fp.content_hash(load_run_config(list(args), single_config), "d" * 64, CLEAN)

    assert digest() == fp.content_hash(matrix_run, "d" * 64, CLEAN)
    for other in ("SEED=3", "LR=0.002", "MAX_ITERS=13"):
        assert digest(other) != digest()


def test_the_trainer_records_the_fingerprint_the_matrix_looks_for(matrix_config, monkeypatch):
    monkeypatch.setattr(fp, "code_version", lambda root=None: CLEAN)
    base, planned = expand([], matrix_config())
    state = launch.create(base, planned, [])
    run_id = planned[0].run_id
    run = load_run_config([], state.root / run_id / "config.txt")
    Trainer(run, state.root / run_id, log=lambda _: None).train()
    metrics = json.loads((state.root / run_id / "metrics.json").read_text())
    assert metrics["status"] == "completed"
    assert metrics["fingerprint"] == fp.fingerprint(planned[0].config)
    state.update(run_id, state="completed")  # as the runner records it
    assert (
        reuse.completed(state.root.parent)[metrics["fingerprint"]["hash"]].name
        == f"{state.root.name}/{run_id}"
    )


@pytest.mark.slow
def test_make_reuses_then_retrains_when_told(project):  # noqa: F811 (fixture)
    """Real training through make in a copy of the project (outside git: the
    code version is the package's and its sources' digest); `make test-rerun`
    is launch.rerun, tested above."""
    synthetic_corpus(project / "corpus.txt", lines=400)
    write_config(
        project / ".config",
        {**TINY, "DATA_CUSTOM_PATH": "corpus.txt", "DATA_DIR": str(project / "data")},
    )
    first = make(project, "test-matrix", "YES=1")
    assert first.returncode == 0 and "1 completed" in first.stdout, first.stderr
    trained = (project / "results" / "latest").resolve()

    dry = make(project, "test-matrix-dry-run")
    line = next(x for x in dry.stdout.splitlines() if x.startswith("gpt2_adamw_none "))
    assert " reused " in line and line.endswith(f"<- {trained.name}/gpt2_adamw_none"), dry.stdout
    assert "1 run reused from earlier runs" in dry.stdout
    second = make(project, "test-matrix", "YES=1")
    assert "1 completed (1 of them reused)" in second.stdout, second.stdout + second.stderr
    reused = (project / "results" / "latest").resolve()
    assert (reused / "gpt2_adamw_none").resolve() == trained / "gpt2_adamw_none"
    assert "started" not in second.stdout  # no training process
    results = make(project, "results")
    assert results.returncode == 0, results.stderr
    assert "| reused |" in (reused / "summary.md").read_text()

    time.sleep(1)  # a matrix is named by the second it starts in
    again = make(project, "test-matrix", "YES=1", "REUSE=n")
    assert "gpt2_adamw_none: started" in again.stdout and "reused" not in again.stdout
