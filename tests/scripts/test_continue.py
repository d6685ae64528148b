"""`make continue` (scripts/continue.py) with real concurrent processes: one
owner per run and per matrix, a run killed -9 before its first checkpoint
starts over, and user errors end as one paragraph with exit code 2."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from lib.jobs.state import MatrixState
from lib.run.owner import owner
from tests.lib.conftest import synthetic_corpus
from tests.lib.matrix.conftest import TINY, write_config
from tests.scripts.conftest import project  # noqa: F401 (fixture)

pytestmark = pytest.mark.slow
ENV = {**{k: v for k, v in os.environ.items() if not k.startswith("MAKE")}, "PYTHONUNBUFFERED": "1"}


def _config(project: Path, **symbols: str) -> None:
    corpus = synthetic_corpus(project / "corpus.txt", lines=400)
    write_config(
        project / ".config",
        {
            **TINY,
            "DATA_CUSTOM_PATH": str(corpus),
            "DATA_DIR": str(project / "data"),
            "RESULTS_DIR": str(project / "results"),
            **symbols,
        },
    )


def _start(project: Path, script: str, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [str(project / ".venv" / "bin" / "python"), str(project / "scripts" / script), *args],
        cwd=project,
        env={**ENV, "PYTHONPATH": str(project)},  # the copy's sources, not the venv's tree
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _run(project: Path, script: str, *args: str) -> tuple[int, str, str]:
    proc = _start(project, script, *args)
    out, err = proc.communicate(timeout=120)
    return proc.returncode, out, err


def _matrix(project: Path) -> Path:
    """A planned matrix whose runs have not started (as after a kill -9 at once)."""
    from lib.matrix import launch
    from lib.matrix.grid import expand

    base, planned = expand([], project / ".config")
    return launch.create(base, planned, []).root


def _wait_for(predicate, what: str, timeout: float = 60.0) -> None:
    deadline = time.time() + timeout
    while not predicate():
        assert time.time() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def _first_done(*procs: subprocess.Popen, timeout: float = 60.0) -> subprocess.Popen:
    _wait_for(lambda: any(p.poll() is not None for p in procs), "a process to end", timeout)
    return next(p for p in procs if p.poll() is not None)


def _refused(code: int, out: str, err: str, *phrases: str) -> None:
    """A user error: one 'error:' paragraph on stderr, exit code 2, no traceback."""
    assert code == 2, out + err
    assert "Traceback" not in out + err
    assert err.startswith("error: ") and len(err.strip().splitlines()) == 1, err
    for phrase in phrases:
        assert phrase in err, err


def _metrics(run_dir: Path) -> dict:
    return json.loads((run_dir / "metrics.json").read_text())


def _starts(run_dir: Path) -> int:
    """How many processes began training this run (each logs 'run <id>: ...')."""
    log = (run_dir / "output.log").read_text()
    return sum(line.startswith(f"run {run_dir.name}: ") for line in log.splitlines())


def test_two_continues_on_a_matrix_and_one_during_it_train_each_run_once(project):
    _config(
        project,
        MATRIX_ABLATION="TRAIN_SEED=1,2",
        MATRIX_PARALLEL_JOBS="2",
        GPT2_MAX_ITERS="24",
        GPT2_EVAL_INTERVAL="12",
    )
    root = _matrix(project)
    runs = sorted(p.name for p in root.iterdir() if p.is_dir())
    one, two = _start(project, "continue.py"), _start(project, "continue.py")
    loser = _first_done(one, two)
    winner = two if loser is one else one
    out, err = loser.communicate()
    _refused(
        loser.returncode,
        out,
        err,
        f"the matrix {root.name} is being trained by PID {winner.pid}",
        "one launcher at a time",
    )
    # During the live matrix: its runs are its launcher's, even one by one.
    code, out, err = _run(project, "continue.py", f"RUN_NAME={root.name}/{runs[0]}")
    assert winner.poll() is None, "the matrix ended before the check ran"
    _refused(code, out, err, f"belongs to the matrix {root.name}", f"launcher PID {winner.pid}")
    out, err = winner.communicate(timeout=120)
    assert winner.returncode == 0, out[-3000:] + err
    assert "2 to run" in out
    state = json.loads((root / "matrix.json").read_text())["runs"]
    for run in runs:
        metrics = _metrics(root / run)
        assert (metrics["status"], metrics["iterations"]) == ("completed", 24)
        assert "resumed" not in [e["event"] for e in metrics["events"]]
        assert _starts(root / run) == 1 and state[run]["attempts"] == 1
    assert owner(root) is None and all(owner(root / r) is None for r in runs)


def test_a_live_run_is_skipped_and_a_run_killed_before_its_first_checkpoint_starts_over(project):
    _config(project, MATRIX_ABLATION="TRAIN_SEED=1,2")
    root = _matrix(project)
    live, other = sorted(p.name for p in root.iterdir() if p.is_dir())
    # A process training one run outside the launcher, recorded "running" as a
    # cluster job records it, with no checkpoint for a long while.
    job = _start(
        project,
        "train.py",
        f"RUN_DIR={root / live}",
        "SET=GPT2_MAX_ITERS=100000 GPT2_EVAL_INTERVAL=100000",
    )
    try:
        MatrixState.load(root).update(live, state="running", attempts=1)
        log = root / live / "output.log"
        _wait_for(lambda: log.exists() and "iter 1/" in log.read_text(), "the job to train")
        code, out, err = _run(project, "continue.py")
        assert code == 0, out[-3000:] + err
        assert "1 to run" in out
        assert f"[matrix] {live}: skipped, its owner is alive: PID {job.pid}" in out
        assert job.poll() is None
    finally:
        os.kill(job.pid, signal.SIGKILL)  # no checkpoint yet; the lock must not outlive it
        job.communicate()
    assert _metrics(root / other)["iterations"] == 12
    assert not (root / live / "ckpt_latest.pt").exists() and owner(root / live) is None

    code, out, err = _run(project, "continue.py")
    assert code == 0, out[-3000:] + err
    assert f"{live}: no checkpoint yet" in out and "restarting it from step 0" in out
    metrics = _metrics(root / live)
    assert (metrics["status"], metrics["iterations"]) == ("completed", 12)
    assert "resumed" not in [e["event"] for e in metrics["events"]]
    state = json.loads((root / "matrix.json").read_text())["runs"]
    assert state[live]["attempts"] == 2 and state[other]["attempts"] == 1  # other not retrained


def test_two_continues_on_one_run_killed_before_its_first_checkpoint(project):
    _config(project)
    first = _start(
        project, "train.py", "RUN_NAME=one", "SET=GPT2_MAX_ITERS=100000 GPT2_EVAL_INTERVAL=100000"
    )
    run_dir = project / "results" / "one"
    log = run_dir / "output.log"
    _wait_for(lambda: log.exists() and "iter 1/" in log.read_text(), "the run to train")
    os.kill(first.pid, signal.SIGKILL)
    first.communicate()
    assert not (run_dir / "ckpt_latest.pt").exists()

    one = _start(project, "continue.py", "RUN_NAME=one", "MAX_ITERS=8")
    two = _start(project, "continue.py", "RUN_NAME=one", "MAX_ITERS=8")
    loser = _first_done(one, two)
    winner = two if loser is one else one
    out, err = loser.communicate()
    _refused(
        loser.returncode,
        out,
        err,
        f"is being trained by PID {winner.pid}",
        "make continue RUN_NAME=one",
    )
    out, err = winner.communicate(timeout=120)
    assert winner.returncode == 0, out[-3000:] + err
    assert "one: no checkpoint yet" in out and "restarting it from step 0" in out
    metrics = _metrics(run_dir)
    assert (metrics["status"], metrics["iterations"]) == ("completed", 8)
    assert "resumed" not in [e["event"] for e in metrics["events"]]
    assert log.read_text().count("restarting it from step 0") == 1
    assert _starts(run_dir) == 2  # the killed attempt and the winner, never the loser

    # Now from a checkpoint: again one resumes, the other refuses.
    one = _start(project, "continue.py", "RUN_NAME=one", "MAX_ITERS=12")
    two = _start(project, "continue.py", "RUN_NAME=one", "MAX_ITERS=12")
    loser = _first_done(one, two)
    winner = two if loser is one else one
    out, err = loser.communicate()
    _refused(loser.returncode, out, err, f"is being trained by PID {winner.pid}")
    out, err = winner.communicate(timeout=120)
    assert winner.returncode == 0, out[-3000:] + err
    metrics = _metrics(run_dir)
    assert (metrics["status"], metrics["iterations"]) == ("completed", 12)
    assert [e["event"] for e in metrics["events"]] == ["resumed"]
    assert log.read_text().count("resuming one from step 8") == 1


def test_user_errors_are_one_paragraph_and_write_nothing_outside_results(project, tmp_path):
    import torch

    from lib.run.checkpoint import save_checkpoint

    _config(project)
    results, outside = project / "results", tmp_path / "outside"
    state = {
        "step": 4,
        "model": torch.nn.Linear(64, 64).state_dict(),
        "optimizer": {},
        "model_config": {},
        "family": "gpt2",
    }
    for name in ("truncated", "corrupt", "outside"):
        folder = outside if name == "outside" else results / name
        folder.mkdir(parents=True)
        (folder / "config.txt").write_text((project / ".config").read_text())
        save_checkpoint(folder / "ckpt_latest.pt", state)
    ckpt = results / "truncated" / "ckpt_latest.pt"
    ckpt.write_bytes(ckpt.read_bytes()[: ckpt.stat().st_size // 2])
    ckpt = results / "corrupt" / "ckpt_latest.pt"
    data = bytearray(ckpt.read_bytes())
    data[:64] = bytes(range(64))
    ckpt.write_bytes(bytes(data))
    before = {p.name: p.stat().st_mtime_ns for p in outside.iterdir()}

    cases = {
        "RUN_NAME=nope": ("no run named 'nope'", "Runs and matrices under"),
        "RUN_NAME=../outside": ("is not a run name",),
        f"RUN_NAME={outside}": ("is not a run name",),
        "RUN_NAME=truncated": ("truncated/ckpt_latest.pt is not a readable checkpoint",),
        "RUN_NAME=corrupt": ("corrupt/ckpt_latest.pt is not a readable checkpoint",),
    }
    procs = {arg: _start(project, "continue.py", arg) for arg in cases}
    for arg, phrases in cases.items():
        out, err = procs[arg].communicate(timeout=120)
        _refused(procs[arg].returncode, out, err, *phrases)
    assert {p.name: p.stat().st_mtime_ns for p in outside.iterdir()} == before
    assert sorted(p.name for p in results.iterdir()) == ["corrupt", "truncated"]


def _snapshot(run_dir: Path) -> dict[str, bytes]:
    """Every file of the run but its owner lock (which each claim rewrites)."""
    return {
        p.name: p.read_bytes()
        for p in sorted(run_dir.iterdir())
        if p.is_file() and p.name != ".owner.lock"
    }


def test_a_completed_run_is_left_untouched_unless_max_iters_is_raised(project):
    _config(project, GPT2_MAX_ITERS="8")
    code, out, err = _run(project, "train.py", "RUN_NAME=done")
    assert code == 0, out[-3000:] + err
    run_dir = project / "results" / "done"
    before = _snapshot(run_dir)
    assert _metrics(run_dir)["peak_memory_mb"] > 0
    for args in ((), ("MAX_ITERS=8",), ("MAX_ITERS=6",)):
        code, out, err = _run(project, "continue.py", "RUN_NAME=done", *args)
        assert code == 0, out[-3000:] + err
        assert out.startswith("done already completed (8 of 8 steps, best val loss "), out
        assert "nothing was changed" in out
        assert "`make continue RUN_NAME=done MAX_ITERS=<more than 8>`" in out
        assert "resuming" not in out + err and "run done:" not in out  # no start-up replayed
        assert _snapshot(run_dir) == before  # metrics.json (peak memory...), log, checkpoints

    code, out, err = _run(project, "continue.py", "RUN_NAME=done", "MAX_ITERS=12")
    assert code == 0, out[-3000:] + err
    metrics = _metrics(run_dir)
    assert (metrics["status"], metrics["iterations"], metrics["max_iters"]) == ("completed", 12, 12)
    assert [e["event"] for e in metrics["events"]] == ["resumed"]
    assert metrics["val_loss"]["iters"] == [4, 8, 12]
    assert (run_dir / "output.log").read_text().count("resuming done from step 8") == 1


def test_a_run_in_another_results_folder_resumes_by_name_and_by_path(project, tmp_path):
    """Started with SET="RESULTS_DIR=...": RUN_NAME= with the same override finds it, and
    so does RUN=<its folder>, as a command and through make."""
    from tests.scripts.conftest import make

    _config(project, GPT2_MAX_ITERS="4")
    elsewhere = tmp_path / "elsewhere"
    moved = f"SET=RESULTS_DIR={elsewhere}"
    code, out, err = _run(project, "train.py", "RUN_NAME=away", moved)
    assert code == 0, out[-3000:] + err
    run_dir = elsewhere / "away"
    assert _metrics(run_dir)["iterations"] == 4 and not (project / "results" / "away").exists()

    code, out, err = _run(project, "continue.py", "RUN_NAME=away", "MAX_ITERS=8")
    _refused(code, out, err, f"no run named 'away' under {project / 'results'}")
    code, out, err = _run(project, "continue.py", "RUN_NAME=away", moved, "MAX_ITERS=8")
    assert code == 0, out[-3000:] + err
    assert _metrics(run_dir)["iterations"] == 8

    done = make(project, "continue", f"RUN={run_dir}", "MAX_ITERS=12")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    metrics = _metrics(run_dir)
    assert (metrics["status"], metrics["iterations"]) == ("completed", 12)
    assert [e["event"] for e in metrics["events"]] == ["resumed", "resumed"]
    again = make(project, "continue", f"RUN={run_dir}")
    assert again.returncode == 0, again.stderr
    assert f"`make continue RUN={run_dir} MAX_ITERS=<more than 12>`" in again.stdout
    both = make(project, "continue", f"RUN={run_dir}", "RUN_NAME=away")
    assert both.returncode == 2 and "give one of them" in both.stderr
    nowhere = make(project, "continue", f"RUN={tmp_path / 'nope'}")
    assert nowhere.returncode == 2 and f"there is no run at {tmp_path / 'nope'}" in nowhere.stderr


def test_continue_does_not_depend_on_a_valid_dot_config(project):
    """The run resumes with its config.txt: a .config with a stray byte and a malformed
    line, or nothing but garbage, does not stop `make continue`."""
    from tests.scripts.conftest import make

    _config(project, GPT2_MAX_ITERS="4")
    code, out, err = _run(project, "train.py", "RUN_NAME=mine")
    assert code == 0, out[-3000:] + err
    dot_config = project / ".config"
    dot_config.write_bytes(dot_config.read_bytes() + b"CONFIG_BROKEN=\xff\xfe\nnot a line at all\n")
    assert make(project, "show").returncode != 0  # the broken .config fails what reads it
    code, out, err = _run(project, "continue.py", "RUN_NAME=mine", "MAX_ITERS=8")
    assert code == 0, out[-3000:] + err
    assert _metrics(project / "results" / "mine")["iterations"] == 8

    dot_config.write_bytes(bytes(range(256)) * 4)  # no RESULTS_DIR line: results/ is where
    done = make(project, "continue", "RUN_NAME=mine", "MAX_ITERS=12")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    metrics = _metrics(project / "results" / "mine")
    assert (metrics["status"], metrics["iterations"]) == ("completed", 12)
    assert dot_config.read_bytes() == bytes(range(256)) * 4  # nothing rewrote it
