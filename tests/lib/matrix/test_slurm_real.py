"""The Slurm executor against a real one-node cluster (scripts/slurm-local.sh):
real sbatch, slurmctld and slurmd, jobs that train tiny runs in a scratch copy
of the project through the make targets a user types.

Skips where the Slurm and munge programs are absent, or where the cluster does
not start (the daemons' log tails say why); SLURM_LOCAL_REQUIRED=1 (CI, where
the packages are installed) makes either a failure instead.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

from lib.jobs import slurm
from tests.lib.conftest import synthetic_corpus
from tests.lib.matrix.conftest import TINY, write_config
from tests.scripts.conftest import ROOT, make, project  # noqa: F401 (fixture)

pytestmark = [pytest.mark.slow, pytest.mark.engine]

SCRIPT = ROOT / "scripts" / "slurm-local.sh"
PARTITION = "local"
REQUIRED = os.environ.get("SLURM_LOCAL_REQUIRED") == "1"


def _unavailable(why: str) -> None:
    if REQUIRED:
        pytest.fail(f"SLURM_LOCAL_REQUIRED=1, but {why}")
    pytest.skip(why)


def _free_port_pair() -> int:
    """A port p with p and p + 1 free (slurmctld, slurmd): a cluster already on
    the default 6817 is left alone."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("", 0))
            port = s.getsockname()[1]
        if port < 65000:
            with socket.socket() as s:
                try:
                    s.bind(("", port + 1))
                    return port
                except OSError:
                    continue
    raise RuntimeError("no two free ports in a row")


@pytest.fixture(scope="session")
def cluster(tmp_path_factory):
    """A running one-node cluster for the session; SLURM_CONF points at it."""
    missing = [
        t
        for t in ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "scancel")
        if shutil.which(t) is None
    ]
    if missing:
        _unavailable(f"not installed: {', '.join(missing)} (apt-get install slurm-wlm munge)")
    if (
        os.geteuid() != 0
        and subprocess.run(["sudo", "-n", "true"], capture_output=True).returncode != 0
    ):
        _unavailable("the Slurm daemons need root, and sudo asks for a password")
    state = tmp_path_factory.mktemp("slurm")
    env = {
        **os.environ,
        "SLURM_LOCAL_DIR": str(state),
        "SLURM_LOCAL_LINK": "0",
        "SLURM_LOCAL_PORT": str(_free_port_pair()),
        "SLURM_LOCAL_PARTITION": PARTITION,
    }
    started = subprocess.run(
        [str(SCRIPT), "start"], env=env, capture_output=True, text=True, timeout=180
    )
    if started.returncode != 0:
        subprocess.run([str(SCRIPT), "stop"], env=env, capture_output=True, timeout=120)
        _unavailable(f"the local Slurm cluster did not start:\n{started.stdout}{started.stderr}")
    previous = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = str(state / "slurm.conf")  # sbatch, squeue, scancel, make
    try:
        yield state
    finally:
        if previous is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = previous
        subprocess.run([str(SCRIPT), "stop"], env=env, capture_output=True, timeout=120)


def configure(project: Path, **symbols: str) -> Path:
    """The tiny CPU run on a synthetic corpus, in Slurm mode, one core a job."""
    corpus = synthetic_corpus(project / "corpus.txt", lines=400)
    write_config(
        project / ".config",
        {
            **TINY,
            "DATA_CUSTOM_PATH": str(corpus),
            "DATA_DIR": str(project / "data"),
            "RESULTS_DIR": str(project / "results"),
            "MATRIX_EXECUTOR": "slurm",
            "SLURM_PARTITION": PARTITION,
            "SLURM_GPUS_PER_NODE": "0",
            "SLURM_CPUS_PER_GPU": "1",
            **symbols,
        },
    )
    return project / "results"


def ok(out: subprocess.CompletedProcess) -> str:
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return out.stdout


def runs(matrix: Path) -> dict[str, dict]:
    return json.loads((matrix / "matrix.json").read_text())["runs"]


def wait_ended(job_ids: list[str], timeout: float) -> dict[str, str]:
    """Slurm's final state of each job, once all have ended."""
    deadline = time.monotonic() + timeout
    while True:
        states = slurm.job_states(job_ids)
        if all(slurm._base(states.get(j, "")) in slurm.ENDED for j in job_ids):
            return states
        assert time.monotonic() < deadline, f"jobs still not ended after {timeout} s: {states}"
        time.sleep(1)


def wait_for(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        assert time.monotonic() < deadline, f"no {what} after {timeout} s"
        time.sleep(0.5)
    return value


def job_output(matrix: Path, run_id: str, job_id: str) -> str:
    path = matrix / run_id / f"slurm-{job_id}.out"
    return path.read_text(errors="replace") if path.is_file() else ""


def test_matrix_jobs_run_for_real_and_results_has_every_run(cluster, project):
    configure(project, MATRIX_ABLATION="TRAIN_SEED=1,2,3")
    out = ok(make(project, "test-matrix", "EXECUTOR=slurm", "YES=1"))
    matrix = (project / "results" / "latest").resolve()
    submitted = runs(matrix)
    jobs = {r: v["slurm_job"] for r, v in submitted.items()}
    assert len(jobs) == 3 and all(j.isdigit() for j in jobs.values()), submitted
    assert len(set(jobs.values())) == 3
    for run_id, job_id in jobs.items():
        assert f"[slurm] {run_id}: submitted as job {job_id}" in out

    final = wait_ended(list(jobs.values()), timeout=240)
    assert {slurm._base(s) for s in final.values()} == {"COMPLETED"}, final
    # `make continue` reads Slurm's states into matrix.json and finds nothing to do.
    assert ": 0 to run, 3 completed" in ok(make(project, "continue"))
    done = runs(matrix)
    for run_id, job_id in jobs.items():
        entry = done[run_id]
        assert (entry["state"], entry["slurm_job"], entry["slurm_state"]) == (
            "completed",
            job_id,
            "COMPLETED",
        ), entry
        assert entry["iterations"] == 12 and entry["attempts"] == 1
        assert not entry.get("note")  # "submitted as job N" went when the job began
        # The job ran the executor's script on a compute node, through Slurm.
        assert f"[matrix] {run_id}: completed" in job_output(matrix, run_id, job_id)
        assert "#SBATCH --partition=local" in (matrix / run_id / "slurm.sh").read_text()

    ok(make(project, "results"))
    summary = (matrix / "summary.md").read_text()
    for run_id in jobs:
        (row,) = [line for line in summary.splitlines() if f"| {run_id} |" in line]
        assert row.endswith("| completed |"), row


def test_a_job_no_node_can_run_is_refused_not_left_pending(cluster, project):
    # The default 8 cores per run on a node with fewer: Slurm would queue it for ever.
    nproc = os.cpu_count() or 1
    configure(project, SLURM_CPUS_PER_GPU=str(nproc + 1))
    out = make(project, "test-matrix", "EXECUTOR=slurm", "YES=1")
    assert out.returncode != 0
    assert "Requested node configuration is not available" in out.stdout + out.stderr
    assert "nothing was submitted" in out.stdout + out.stderr
    matrix = (project / "results" / "latest").resolve()
    assert all("slurm_job" not in v for v in runs(matrix).values())


def test_a_failing_job_is_recorded_failed_with_its_log_tail_while_the_others_finish(
    cluster, project
):
    configure(project, MATRIX_ABLATION="TRAIN_SEED=1,2,3")
    # DRY_RUN writes the matrix and its scripts; one run's data path is then broken,
    # and `make continue` submits all three.
    ok(make(project, "test-matrix", "EXECUTOR=slurm", "DRY_RUN=1"))
    matrix = (project / "results" / "latest").resolve()
    bad = "gpt2_adamw_none_train_seed2"
    config = matrix / bad / "config.txt"
    missing = project / "no-such-corpus.txt"
    text, n = re.subn(
        r"^CONFIG_DATA_CUSTOM_PATH=.*$",
        f'CONFIG_DATA_CUSTOM_PATH="{missing}"',
        config.read_text(),
        flags=re.M,
    )
    assert n == 1
    config.write_text(text)
    ok(make(project, "continue"))
    jobs = {r: v["slurm_job"] for r, v in runs(matrix).items()}
    final = wait_ended(list(jobs.values()), timeout=240)
    assert slurm._base(final[jobs[bad]]) == "FAILED", final
    make(project, "continue")  # records Slurm's states; keeps the failed run failed

    done = runs(matrix)
    assert done[bad]["state"] == "failed" and done[bad]["slurm_state"] == "FAILED", done[bad]
    assert str(missing) in done[bad]["error"] + done[bad]["log_tail"], done[bad]
    for run_id in set(jobs) - {bad}:
        assert done[run_id]["state"] == "completed" and done[run_id]["iterations"] == 12
        assert done[run_id]["slurm_state"] == "COMPLETED"
    assert done[bad]["attempts"] == 1  # not retried without RETRY_FAILED=1


def test_scancel_and_the_time_limit_stop_runs_that_continue_resumes(cluster, project):
    # Long runs: 100000 steps never finish here. A 2-minute limit: Slurm's
    # warning (SIGUSR1, sbatch --signal) or the limit's own SIGTERM stops the
    # second run with a checkpoint after a minute or more.
    configure(
        project,
        MATRIX_ABLATION="TRAIN_SEED=1,2",
        GPT2_MAX_ITERS="100000",
        GPT2_EVAL_INTERVAL="500",
        SLURM_TIME_LIMIT="2",
    )
    ok(make(project, "test-matrix", "EXECUTOR=slurm", "YES=1"))
    matrix = (project / "results" / "latest").resolve()
    cancelled, limited = "gpt2_adamw_none_train_seed1", "gpt2_adamw_none_train_seed2"
    first = {r: v["slurm_job"] for r, v in runs(matrix).items()}

    # scancel once the run trains (its progress bar is past step 50).
    wait_for(
        lambda: re.search(
            r"\b([5-9]\d|\d{3,})/100000", job_output(matrix, cancelled, first[cancelled])
        ),
        timeout=120,
        what="training progress",
    )
    subprocess.run(["scancel", first[cancelled]], check=True)
    final = wait_ended(list(first.values()), timeout=240)
    assert slurm._base(final[first[cancelled]]) == "CANCELLED", final
    # The warning path ends the job itself (COMPLETED); the limit kills it (TIMEOUT).
    assert slurm._base(final[first[limited]]) in ("COMPLETED", "TIMEOUT"), final

    out = ok(make(project, "continue"))
    assert "2 to run" in out, out
    stopped = runs(matrix)
    second = {r: v["slurm_job"] for r, v in stopped.items()}
    assert set(second.values()).isdisjoint(first.values())  # resubmitted: new jobs
    steps = {}
    for run_id in first:
        entry = stopped[run_id]
        # Stopped with a checkpoint: the state before the resubmission was pending.
        assert entry["attempts"] == 1 and entry["iterations"] > 0, entry
        steps[run_id] = entry["iterations"]
        assert (matrix / run_id / "ckpt_latest.pt").is_file()
    assert "SIGTERM" in job_output(matrix, cancelled, first[cancelled])
    # 2 minutes at >= 5 steps/s: far more than scancel's few seconds.
    assert steps[limited] > 300, steps

    # Each resumes from its checkpoint's step, then is cancelled to end the test.
    for run_id, job_id in second.items():
        wait_for(
            lambda run_id=run_id, job_id=job_id: (
                f"resuming {run_id} from step {steps[run_id]}" in job_output(matrix, run_id, job_id)
            ),
            timeout=120,
            what=f"{run_id} resuming",
        )
    time.sleep(3)
    subprocess.run(["scancel", *second.values()], check=True)
    wait_ended(list(second.values()), timeout=120)
    after = runs(matrix)
    for run_id in first:
        assert after[run_id]["state"] == "pending" and after[run_id]["attempts"] == 2
        assert after[run_id]["iterations"] > steps[run_id], (after[run_id], steps)


def test_a_tuned_matrix_runs_its_trials_and_final_runs_as_jobs(cluster, project):
    # Trials of 8 steps (2 evaluations each), then the final run at the best LR.
    configure(project, GPT2_MAX_ITERS="12", TRAIN_SEED="1")
    out = ok(
        make(
            project,
            "test-matrix",
            "EXECUTOR=slurm",
            "YES=1",
            "TUNE=LR",
            "TUNE_TRIALS=3",
            "TUNE_FRACTION=70",
        )
    )
    matrix = (project / "results" / "latest").resolve()
    (record_path,) = (matrix / "tune").glob("*/tuning.json")
    record = json.loads(record_path.read_text())
    assert len(record["trials"]) == 3, record["trials"]
    assert {t["state"] for t in record["trials"]} <= {"complete", "pruned"}, record["trials"]
    # Each trial ran as a Slurm job of its own (its folder holds the job's log).
    for trial in record["trials"]:
        assert list((matrix / trial["run_dir"]).glob("slurm-*.out")), trial
    final = runs(matrix)
    jobs = {r: v["slurm_job"] for r, v in final.items()}
    assert len(jobs) == 1, final
    wait_ended(list(jobs.values()), timeout=240)
    ok(make(project, "continue"))
    (entry,) = runs(matrix).values()
    assert entry["state"] == "completed", entry
    assert entry["tuned"]["values"] == record["best"]["params"], (entry, record["best"])
    assert "submitted as job" in out
