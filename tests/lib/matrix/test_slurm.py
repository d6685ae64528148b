"""The Slurm executor without a cluster: a fake sbatch on PATH records what
it was asked; the job body runs for real."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from lib.config.kconfig import ROOT
from lib.jobs import slurm
from lib.jobs.state import MatrixError, MatrixState
from lib.matrix import launch

SLURM = {
    "MATRIX_EXECUTOR": "slurm",
    "SLURM_PARTITION": "gpu",
    "SLURM_ACCOUNT": "proj42",
    "SLURM_TIME_LIMIT": "90",
    "MATRIX_ABLATION": "TRAIN_SEED=1,2",
}


@pytest.fixture
def fake_sbatch(tmp_path, monkeypatch):
    """sbatch that appends its arguments to calls.txt and prints a job id."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls.txt"
    script = bin_dir / "sbatch"
    # --test-only (the resource check) is answered and counted apart.
    script.write_text(
        f'#!/bin/sh\nif [ "$1" = --test-only ]; then echo "$@" >> {calls}.test; '
        f'exit 0; fi\necho "$@" >> {calls}\n'
        f"echo $((1000 + $(wc -l < {calls})))\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    return calls


def _show(base, planned):
    pass


def test_scripts_are_written_and_submitted(matrix_config, fake_sbatch):
    path = matrix_config(**SLURM, SLURM_NODES="2", SLURM_GPUS_PER_NODE="4")
    assert launch.start(["YES=1"], lambda _: True, _show, path=path) == 0
    root = sorted((path.parent / "results").glob("matrix_*"))[0]
    state = MatrixState.load(root)
    assert {r: v["slurm_job"] for r, v in state.runs.items()} == {
        "gpt2_adamw_none_train_seed1": "1001",
        "gpt2_adamw_none_train_seed2": "1002",
    }
    calls = fake_sbatch.read_text().splitlines()
    assert calls == [f"--parsable {root / r / 'slurm.sh'}" for r in state.runs]
    # Both runs ask for the same resources: one check before submitting.
    assert Path(f"{fake_sbatch}.test").read_text().splitlines() == [
        f"--test-only {root / 'gpt2_adamw_none_train_seed1' / 'slurm.sh'}"
    ]
    script = (root / "gpt2_adamw_none_train_seed1" / "slurm.sh").read_text()
    for line in (
        "#SBATCH --partition=gpu",
        "#SBATCH --account=proj42",
        "#SBATCH --nodes=2",
        "#SBATCH --gpus-per-node=4",
        "#SBATCH --time=90",
        "#SBATCH --cpus-per-task=32",
    ):
        assert line in script.splitlines()
    assert 'HEAD=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)' in script
    assert (
        '"srun --ntasks-per-node=1 ' in script
        and "--nnodes=2 --nproc-per-node=4 "
        "--rdzv-backend=c10d --rdzv-endpoint=$HEAD:29500 --rdzv-id=$SLURM_JOB_ID"
        in script
    )
    assert f"RUN_DIR={root / 'gpt2_adamw_none_train_seed1'}" in script
    # the job's command line parses as shell (bash -n)
    assert (
        subprocess.run(
            ["bash", "-n", str(root / "gpt2_adamw_none_train_seed1" / "slurm.sh")]
        ).returncode
        == 0
    )


def test_dry_run_writes_and_prints_but_submits_nothing(matrix_config, fake_sbatch, capsys):
    path = matrix_config(**SLURM)
    assert launch.start(["DRY_RUN=1"], lambda _: True, _show, path=path) == 0
    out = capsys.readouterr().out
    assert out.count("#SBATCH --partition=gpu") == 2 and "$ sbatch --parsable" in out
    assert not fake_sbatch.exists()


def test_a_request_no_node_can_meet_is_refused_before_anything_is_submitted(
    matrix_config, fake_sbatch
):
    # Slurm's answer on a 2-core node without GPUs; it would accept the job and
    # leave it pending for ever (Reason=PartitionConfig).
    sbatch = fake_sbatch.parent / "bin" / "sbatch"
    sbatch.write_text(
        '#!/bin/sh\nif [ "$1" = --test-only ]; then echo \'allocation failure: '
        "Requested node configuration is not available' >&2; exit 1; fi\n"
        f'echo "$@" >> {fake_sbatch}\necho 1\n'
    )
    path = matrix_config(**SLURM, SLURM_GPUS_PER_NODE="0")
    with pytest.raises(
        MatrixError,
        match=r"cannot run .*--cpus-per-task=8.*Requested node "
        r"configuration is not available.*nothing was submitted",
    ):
        launch.start(["YES=1"], lambda _: True, _show, path=path)
    assert not fake_sbatch.exists()


def test_missing_sbatch_is_a_clear_error(matrix_config, monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    path = matrix_config(**SLURM)
    with pytest.raises(MatrixError, match="needs `sbatch` on PATH"):
        launch.start(["YES=1"], lambda _: True, _show, path=path)


@pytest.mark.slow
def test_job_body_trains_and_records_the_run(matrix_config, fake_sbatch):
    path = matrix_config(**SLURM)
    launch.start(["YES=1"], lambda _: True, _show, path=path)
    root = sorted((path.parent / "results").glob("matrix_*"))[0]
    run_dir = root / "gpt2_adamw_none_train_seed2"
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "matrix.py"), "job", f"RUN_DIR={run_dir}"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr
    entry = json.loads((root / "matrix.json").read_text())["runs"]["gpt2_adamw_none_train_seed2"]
    assert entry["state"] == "completed" and entry["slurm_job"] == "1002"
    assert json.loads((run_dir / "metrics.json").read_text())["iterations"] == 12


@pytest.mark.parametrize(
    "slurm_state, state",
    [
        ("PENDING", "pending"),
        ("REQUEUED", "pending"),
        ("RUNNING", "running"),
        ("COMPLETING", "running"),
        ("COMPLETED", "pending"),
        ("FAILED", "failed"),
        ("OUT_OF_MEMORY", "failed"),
        ("CANCELLED by 1000", "pending"),
        ("CANCELLED+", "pending"),
        ("TIMEOUT", "pending"),
        ("NODE_FAIL", "pending"),
        ("PREEMPTED", "pending"),
        ("SOMETHING_NEW", "running"),
    ],
)
def test_slurm_states_map_to_ours(slurm_state, state):
    # An ended job's COMPLETED is "pending" here: its body exited 0 without
    # recording an end, so `make continue` resumes it (a recorded end wins).
    assert slurm.ours(slurm_state) == state


def _fake(bin_dir, name: str, output: str, code: int = 0) -> None:
    path = bin_dir / name
    path.write_text(f"#!/bin/sh\nprintf '%s' '{output}'\nexit {code}\n")
    path.chmod(0o755)


def test_reconcile_settles_runs_whose_jobs_ended_unrecorded(tmp_path, monkeypatch):
    """squeue knows the recent jobs, sacct an older one; matrix.json says
    pending or running for jobs the body could not record the end of."""
    root = tmp_path / "m"
    root.mkdir()
    names = ["done", "lost", "oom", "cancelled", "old", "queued", "gone"]
    state = MatrixState.create(root, "m", {n: [] for n in names}, {}, 0)
    recorded = {
        "done": "completed",
        "lost": "running",
        "oom": "running",
        "cancelled": "pending",
        "old": "running",
        "queued": "pending",
        "gone": "running",
    }
    for i, name in enumerate(names):
        (root / name).mkdir()
        state.update(name, state=recorded[name], slurm_job=str(100 + i))
    (root / "oom" / "slurm-102.out").write_text(
        "step 7\nslurmstepd: error: Detected 1 oom_kill event in StepId=102.batch\n"
    )
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _fake(
        bin_dir,
        "squeue",
        "100|COMPLETED\n101|NODE_FAIL\n102|OUT_OF_MEMORY\n103|CANCELLED\n105|PENDING\n",
    )
    _fake(bin_dir, "sacct", "104|TIMEOUT\n")  # 106: forgotten by both
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")

    seen = slurm.reconcile(state)
    assert seen == {
        "done": "COMPLETED",
        "lost": "NODE_FAIL",
        "oom": "OUT_OF_MEMORY",
        "cancelled": "CANCELLED",
        "old": "TIMEOUT",
        "queued": "PENDING",
    }
    runs = MatrixState.load(root).runs
    assert {n: runs[n]["state"] for n in names} == {
        "done": "completed",
        "lost": "pending",
        "oom": "failed",
        "cancelled": "pending",
        "old": "pending",
        "queued": "pending",
        "gone": "running",
    }
    assert runs["lost"]["note"].startswith("Slurm job 101 ended NODE_FAIL")
    assert runs["oom"]["error"] == "Slurm job 102 ended OUT_OF_MEMORY"
    assert runs["oom"]["log_tail"].endswith("oom_kill event in StepId=102.batch")
    assert runs["old"]["slurm_state"] == "TIMEOUT" and "slurm_state" not in runs["gone"]


def test_reconcile_without_accounting_uses_squeue_alone(tmp_path, monkeypatch):
    """No slurmdbd: sacct exits 1 ("accounting storage is disabled"); squeue exits 1
    when it knows none of the ids. Nothing is changed."""
    root = tmp_path / "m"
    root.mkdir()
    state = MatrixState.create(root, "m", {"r": []}, {}, 0)
    state.update("r", state="running", slurm_job="7")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _fake(bin_dir, "squeue", "slurm_load_jobs error: Invalid job id specified", 1)
    _fake(bin_dir, "sacct", "Slurm accounting storage is disabled", 1)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    assert slurm.reconcile(state) == {}
    assert MatrixState.load(root).runs["r"]["state"] == "running"


@pytest.mark.parametrize(
    "limit, asked, sent", [(240, 300, 300), (4, 900, 120), (3, 300, 60), (2, 300, 1), (1, 10, 1)]
)
def test_the_warning_leaves_training_time_though_slurm_sends_it_a_minute_early(limit, asked, sent):
    job = slurm.SlurmSettings(
        nodes=1,
        gpus_per_node=0,
        cpus_per_gpu=1,
        time_limit=limit,
        signal_seconds=asked,
        rdzv_port=29500,
        partition=None,
        account=None,
    )
    assert slurm.warning_seconds(job) == sent
    # Sent up to SIGNAL_EARLY_S early, it still comes after a minute of training
    # where the limit allows one.
    if limit >= 3:
        assert limit * 60 - sent - slurm.SIGNAL_EARLY_S >= 60
