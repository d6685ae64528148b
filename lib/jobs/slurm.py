"""Slurm executor: one sbatch script per run, submitted with `sbatch --parsable`.

Each job runs `scripts/matrix.py job RUN_DIR=<run folder>`, which records
the run's state in matrix.json exactly as a local matrix does (running, then
completed / failed / diverged / pending after a preemption), so `make
continue` and `make results` work on cluster runs unchanged. A run over
several nodes starts its ranks with `srun python -m torch.distributed.run`
and a c10d rendezvous on the job's first node.

Before the time limit Slurm sends SIGUSR1 (SLURM_SIGNAL_SECONDS ahead; see
render()): the run stops at a step boundary with a checkpoint, exits with
EXIT_RESUMABLE (lib/run/signals.py) and is recorded pending, so `make continue`
submits it again and it resumes exactly. A preemption or `scancel` sends
SIGTERM, handled the same way; a cluster that requeues preempted jobs
reruns the script, which resumes from the checkpoint by itself.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lib.jobs.state import MatrixError, MatrixState
from lib.paths import ROOT, SCRIPTS

if TYPE_CHECKING:
    from lib.config.run_config import RunConfig

JOB = SCRIPTS / "matrix.py"


@dataclass(frozen=True)
class SlurmSettings:
    """The SLURM_* symbols of a run, all present: Kconfig shows them only
    under MATRIX_EXECUTOR_SLURM, so the RunConfig types them as optional."""

    nodes: int
    gpus_per_node: int
    cpus_per_gpu: int
    time_limit: int  # minutes
    signal_seconds: int
    rdzv_port: int
    partition: str | None
    account: str | None


def _required(value: int | None, symbol: str) -> int:
    if value is None:
        raise MatrixError(f"a Slurm job needs {symbol}: set MATRIX_EXECUTOR=slurm")
    return value


def settings(run: RunConfig) -> SlurmSettings:
    """run's Slurm settings; MatrixError for a run not configured for Slurm."""
    return SlurmSettings(
        nodes=_required(run.SLURM_NODES, "SLURM_NODES"),
        gpus_per_node=_required(run.SLURM_GPUS_PER_NODE, "SLURM_GPUS_PER_NODE"),
        cpus_per_gpu=_required(run.SLURM_CPUS_PER_GPU, "SLURM_CPUS_PER_GPU"),
        time_limit=_required(run.SLURM_TIME_LIMIT, "SLURM_TIME_LIMIT"),
        signal_seconds=_required(run.SLURM_SIGNAL_SECONDS, "SLURM_SIGNAL_SECONDS"),
        rdzv_port=_required(run.SLURM_RDZV_PORT, "SLURM_RDZV_PORT"),
        partition=run.SLURM_PARTITION,
        account=run.SLURM_ACCOUNT,
    )


def launcher(job: SlurmSettings) -> list[str]:
    """The command prefix that starts a multi-node run's ranks ([] on one node)."""
    if job.nodes == 1:
        return []
    return [
        "srun",
        "--ntasks-per-node=1",
        sys.executable,
        "-m",
        "torch.distributed.run",
        f"--nnodes={job.nodes}",
        f"--nproc-per-node={max(1, job.gpus_per_node)}",
        "--rdzv-backend=c10d",
        f"--rdzv-endpoint=$HEAD:{job.rdzv_port}",
        "--rdzv-id=$SLURM_JOB_ID",
    ]


# Slurm checks for due signals now and then: --signal "may be sent up to 60
# seconds earlier than specified" (sbatch(1)); seen on Slurm 22.05 at 45 s.
SIGNAL_EARLY_S = 60


def warning_seconds(job: SlurmSettings) -> int:
    """SLURM_SIGNAL_SECONDS, at most half the time limit, and early enough that
    a warning Slurm sends a minute early still leaves a minute of training: a
    warning at once would stop every attempt before it trained (seen with
    --time=1). Under 3 minutes, 1 s: the warning then comes in the last minute,
    and the time limit's own SIGTERM, which the run handles the same way, is
    the backstop."""
    limit = job.time_limit * 60
    return max(1, min(job.signal_seconds, limit // 2, limit - 2 * SIGNAL_EARLY_S))


def render(run: RunConfig, run_dir: Path, job_name: str) -> str:
    """The sbatch script of one run (run: its RunConfig)."""
    job = settings(run)
    gpus = job.gpus_per_node
    lines = [
        "#!/bin/bash",
        f"#SBATCH --job-name={job_name}",
        f"#SBATCH --nodes={job.nodes}",
        "#SBATCH --ntasks-per-node=1",
        f"#SBATCH --cpus-per-task={job.cpus_per_gpu * max(1, gpus)}",
        f"#SBATCH --time={job.time_limit}",
        f"#SBATCH --output={run_dir}/slurm-%j.out",
        # B: signals the batch shell alone, which `exec` below makes the job
        # process (lib/jobs/runner.py): it forwards a stop to its child as
        # SIGTERM, which srun and torchrun pass on to every rank. Without B:
        # Slurm would signal srun's tasks directly: torchrun agents die of
        # SIGUSR1 unless told to handle it, and a one-node run, started
        # without srun, is not in any step that Slurm signals.
        "# Stop warning: the run checkpoints and exits 75; `make continue` resumes it.",
        f"#SBATCH --signal=B:USR1@{warning_seconds(job)}",
    ]
    if gpus:
        lines.append(f"#SBATCH --gpus-per-node={gpus}")
    if job.partition:
        lines.append(f"#SBATCH --partition={job.partition}")
    if job.account:
        lines.append(f"#SBATCH --account={job.account}")
    lines += [
        "# Generated by `make test-matrix EXECUTOR=slurm`; resubmitted by `make continue`.",
        "set -euo pipefail",
        f"cd {shlex.quote(str(ROOT))}",
    ]
    command = [sys.executable, str(JOB), "job", f"RUN_DIR={run_dir}"]
    prefix = launcher(job)
    if prefix:
        lines.append('HEAD=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)')
        # $HEAD and $SLURM_JOB_ID expand in the job, not here.
        command += ["--launcher", " ".join(prefix)]
    lines.append("exec " + " ".join(shlex.quote(w) if "$" not in w else f'"{w}"' for w in command))
    return "\n".join(lines) + "\n"


# Slurm's job states (squeue %T, sacct State, scontrol JobState) -> ours. A job
# still queued or running keeps its run as Slurm says; for one that ended, the
# job body's own record in matrix.json is what counts (it ran to its end), and
# Slurm's state only explains a run the body could not record the end of:
# killed at once (SIGKILL after KillWait, a lost node, the OOM killer).
RESUMABLE_END = ("CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "COMPLETED")
FAILED_END = ("FAILED", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE")
STATE_MAP = {
    **{
        s: "pending"
        for s in (
            "PENDING",
            "CONFIGURING",
            "REQUEUED",
            "REQUEUE_FED",
            "REQUEUE_HOLD",
            "RESV_DEL_HOLD",
            "SPECIAL_EXIT",
            "SUSPENDED",
            "STOPPED",
        )
    },
    **{s: "running" for s in ("RUNNING", "COMPLETING", "STAGE_OUT", "SIGNALING", "RESIZING")},
    # Ended, resumable from the last checkpoint: `make continue` submits it again.
    # COMPLETED here is a job whose body exited 0 without recording an end.
    **{s: "pending" for s in RESUMABLE_END},
    **{s: "failed" for s in FAILED_END},
}
ENDED = RESUMABLE_END + FAILED_END


def _base(slurm_state: str) -> str:
    return slurm_state.split()[0].rstrip("+") if slurm_state.strip() else ""


def ours(slurm_state: str) -> str:
    """Our run state for a Slurm job state; sacct writes "CANCELLED by 1000" and
    squeue may add a "+" (e.g. "CANCELLED+"). Unknown states count as running:
    the job is Slurm's until it says it ended."""
    return STATE_MAP.get(_base(slurm_state), "running")


def job_states(job_ids: list[str]) -> dict[str, str]:
    """Slurm's state of each job it still knows: squeue --states=all covers
    queued, running and recently ended jobs (MinJobAge, 300 s by default);
    sacct the older ones, where the cluster keeps accounting."""
    ids = sorted({j for j in job_ids if j})
    found: dict[str, str] = {}
    if not ids:
        return found
    if shutil.which("squeue"):
        # Exit 1 when no id is known any more; the ones it knows are printed.
        out = subprocess.run(
            ["squeue", "--noheader", "--states=all", "--format=%i|%T", f"--jobs={','.join(ids)}"],
            capture_output=True,
            text=True,
        )
        found.update(_pairs(out.stdout, ids))
    rest = [j for j in ids if j not in found]
    if rest and shutil.which("sacct"):
        # -X: the job's own line, not its steps'; "Slurm accounting storage is
        # disabled" (no slurmdbd) exits non-zero with nothing on stdout.
        out = subprocess.run(
            [
                "sacct",
                "-X",
                "--noheader",
                "--parsable2",
                "--format=JobID,State",
                f"--jobs={','.join(rest)}",
            ],
            capture_output=True,
            text=True,
        )
        if out.returncode == 0:
            found.update(_pairs(out.stdout, rest))
    return found


def _pairs(text: str, ids: list[str]) -> dict[str, str]:
    pairs = (line.split("|", 1) for line in text.splitlines() if "|" in line)
    return {job: state.strip() for job, state in pairs if job.strip() in ids}


def reconcile(state: MatrixState) -> dict[str, str]:
    """Record Slurm's state of each run's job in matrix.json (slurm_state) and
    settle runs whose job ended while matrix.json still says pending or running
    (the body was killed before it could write its end): pending to resume for a
    cancelled, timed-out, preempted or node-failed job, failed with the job
    output's tail for a failed or out-of-memory one. Returns run -> Slurm state."""
    jobs = {r: v["slurm_job"] for r, v in state.runs.items() if v.get("slurm_job")}
    slurm_states = job_states(list(jobs.values()))
    live = state.live()
    seen: dict[str, str] = {}
    for run_id, job_id in jobs.items():
        known = slurm_states.get(job_id)
        if known is None:
            continue
        seen[run_id] = known
        entry, base = state.runs[run_id], _base(known)
        fields: dict[str, Any] = {"slurm_state": known} if entry.get("slurm_state") != known else {}
        if entry["state"] in ("pending", "running") and base in ENDED and run_id not in live:
            mapped = ours(known)
            if mapped == "failed":
                fields.update(
                    state="failed",
                    error=f"Slurm job {job_id} ended {known}",
                    log_tail=job_log_tail(state.root / run_id, job_id),
                )
            elif entry["state"] == "running":
                fields.update(
                    state="pending",
                    note=f"Slurm job {job_id} ended {known} before the run recorded "
                    f"its end; `make continue` resumes it from its checkpoint",
                )
        if fields:
            state.update(run_id, **fields)
    return seen


def job_log_tail(run_dir: Path, job_id: str, lines: int = 30) -> str:
    """The end of the job's output (slurm-<job>.out), else the run's own log."""
    from lib.jobs.runner import log_tail

    path = run_dir / f"slurm-{job_id}.out"
    if path.is_file():
        text = path.read_text(errors="replace").splitlines()
        if text:
            return "\n".join(text[-lines:])
    return log_tail(run_dir, lines)


def queued_jobs() -> set[str]:
    """Job ids Slurm still holds (pending or running); empty without squeue."""
    if shutil.which("squeue") is None:
        return set()
    out = subprocess.run(
        ["squeue", "--noheader", "--format=%i", "--me"], capture_output=True, text=True
    )
    return set(out.stdout.split()) if out.returncode == 0 else set()


def _write(state: MatrixState, run_id: str, run: RunConfig) -> Path:
    script = state.root / run_id / "slurm.sh"
    script.write_text(render(run, state.root / run_id, f"{state.data['matrix_id']}:{run_id}"))
    return script


def check_resources(scripts: list[Path]) -> None:
    """`sbatch --test-only` each distinct request before submitting any: Slurm
    accepts a job asking for more than any node has (more CPUs, a GPU on a node
    without one, a partition's limit) and leaves it pending for ever (Reason
    PartitionConfig), unless the cluster sets EnforcePartLimits."""
    seen: set[tuple[str, ...]] = set()
    for script in scripts:
        request = tuple(
            line
            for line in script.read_text().splitlines()
            if line.startswith("#SBATCH")
            and not line.startswith(("#SBATCH --job-name", "#SBATCH --output"))
        )
        if request in seen:
            continue
        seen.add(request)
        done = subprocess.run(
            ["sbatch", "--test-only", str(script)], capture_output=True, text=True
        )
        if done.returncode != 0:
            asked = " ".join(
                line.removeprefix("#SBATCH ")
                for line in request
                if not line.startswith("#SBATCH --signal")
            )
            raise MatrixError(
                f"the cluster cannot run {script} ({asked}): "
                f"{(done.stderr or done.stdout).strip()}. Ask for what `sinfo -o '%P %c %m %G'` "
                f"shows a node has: SLURM_CPUS_PER_GPU, SLURM_GPUS_PER_NODE (0 on nodes without "
                f"GPUs), SLURM_PARTITION, SLURM_TIME_LIMIT; nothing was submitted"
            )


def submit(
    state: MatrixState, run_ids: list[str], configs: dict[str, Any], dry_run: bool = False
) -> list[str]:
    """Write each run's slurm.sh and submit it; returns the job ids (or, with
    dry_run, the commands that would run). A run whose job is still queued is
    not submitted twice."""
    if not dry_run and shutil.which("sbatch") is None:
        raise MatrixError(
            "EXECUTOR=slurm needs `sbatch` on PATH (run on the cluster's login "
            "node), or DRY_RUN=1 to only write and print the scripts"
        )
    queued, out = (set() if dry_run else queued_jobs()), []
    scripts = {
        r: _write(state, r, configs[r])
        for r in run_ids
        if state.runs[r].get("slurm_job") not in queued
    }
    if not dry_run:
        check_resources(list(scripts.values()))
    for run_id in run_ids:
        entry = state.runs[run_id]
        if entry.get("slurm_job") in queued:
            print(f"[slurm] {run_id}: job {entry['slurm_job']} is still queued; not resubmitted")
            continue
        script = scripts[run_id]
        cmd = ["sbatch", "--parsable", str(script)]
        if dry_run:
            print(f"# {run_id}\n{script.read_text()}$ {' '.join(cmd)}\n")
            out.append(" ".join(cmd))
            continue
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            raise MatrixError(f"sbatch refused {script}: {done.stderr.strip() or done.stdout}")
        job_id = done.stdout.strip().split(";")[0]
        state.update(run_id, slurm_job=job_id, state="pending", note=f"submitted as job {job_id}")
        print(f"[slurm] {run_id}: submitted as job {job_id}")
        out.append(job_id)
    return out
