"""The Slurm executor without a cluster: a fake sbatch on PATH records what
it was asked; the job body runs for real."""
from __future__ import annotations

import json
import os
import stat
import subprocess
import sys

import pytest

from lib.config.kconfig import ROOT
from lib.matrix import launch
from lib.matrix.state import MatrixError, MatrixState

SLURM = {"MATRIX_EXECUTOR": "slurm", "SLURM_PARTITION": "gpu", "SLURM_ACCOUNT": "proj42",
         "SLURM_TIME_LIMIT": "90", "MATRIX_ABLATION": "TRAIN_SEED=1,2"}


@pytest.fixture
def fake_sbatch(tmp_path, monkeypatch):
    """sbatch that appends its arguments to calls.txt and prints a job id."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls.txt"
    script = bin_dir / "sbatch"
    script.write_text(f"#!/bin/sh\necho \"$@\" >> {calls}\n"
                      f"echo $((1000 + $(wc -l < {calls})))\n")
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
        "gpt2_adamw_none_train_seed1": "1001", "gpt2_adamw_none_train_seed2": "1002"}
    calls = fake_sbatch.read_text().splitlines()
    assert calls == [f"--parsable {root / r / 'slurm.sh'}" for r in state.runs]
    script = (root / "gpt2_adamw_none_train_seed1" / "slurm.sh").read_text()
    for line in ("#SBATCH --partition=gpu", "#SBATCH --account=proj42", "#SBATCH --nodes=2",
                 "#SBATCH --gpus-per-node=4", "#SBATCH --time=90", "#SBATCH --cpus-per-task=32"):
        assert line in script.splitlines()
    assert 'HEAD=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)' in script
    assert ('"srun --ntasks-per-node=1 ' in script and "--nnodes=2 --nproc-per-node=4 "
            "--rdzv-backend=c10d --rdzv-endpoint=$HEAD:29500 --rdzv-id=$SLURM_JOB_ID" in script)
    assert f"RUN_DIR={root / 'gpt2_adamw_none_train_seed1'}" in script
    # the job's command line parses as shell (bash -n)
    assert subprocess.run(["bash", "-n", str(root / "gpt2_adamw_none_train_seed1" / "slurm.sh")]
                          ).returncode == 0


def test_dry_run_writes_and_prints_but_submits_nothing(matrix_config, fake_sbatch, capsys):
    path = matrix_config(**SLURM)
    assert launch.start(["DRY_RUN=1"], lambda _: True, _show, path=path) == 0
    out = capsys.readouterr().out
    assert out.count("#SBATCH --partition=gpu") == 2 and "$ sbatch --parsable" in out
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
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "test_matrix.py"), "job",
                           f"RUN_DIR={run_dir}"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr
    entry = json.loads((root / "matrix.json").read_text())["runs"]["gpt2_adamw_none_train_seed2"]
    assert entry["state"] == "completed" and entry["slurm_job"] == "1002"
    assert json.loads((run_dir / "metrics.json").read_text())["iterations"] == 12
