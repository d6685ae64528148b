"""What a run's records guarantee after kill -9 and a full disk, and their file modes.

Real processes killed by SIGKILL at exact points of their writes (tests/lib/
kill_driver.py), real write failures (RLIMIT_FSIZE, and ENOSPC on a small tmpfs
where this machine lets a test mount one), real umasks.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from lib.atomic import remove_stale_temps, write_json_atomic, write_text_atomic
from lib.run.backup import Backup
from lib.run.checkpoint import load_checkpoint, save_checkpoint

DRIVER = Path(__file__).with_name("kill_driver.py")
TEMP = re.compile(r"^\..+\.[0-9a-z_]{8}\.tmp$")  # write_atomic's (and mkstemp's) temporaries


def new_run(tiny_run, tmp_path: Path, name: str, **settings) -> Path:
    """A run folder holding only config.txt, as the test matrix prepares one."""
    cfg = tiny_run(RUN_NAME=name, GPT2_MAX_ITERS=12, GPT2_EVAL_INTERVAL=2, **settings)
    run_dir = tmp_path / "results" / name
    run_dir.mkdir(parents=True)
    (run_dir / "config.txt").write_text(cfg.config_text)
    return run_dir


def train(
    run_dir: Path, kill_at: str = "", umask: int = 0o022, fsize: int = 0, **env: str
) -> subprocess.CompletedProcess:
    """train.py RUN_DIR=run_dir in a new process (it resumes from ckpt_latest.pt);
    env: more of kill_driver.py's settings (DISK_FULL_AFTER=...)."""
    env = {**os.environ, "KILL_AT": kill_at, "FSIZE_LIMIT": str(fsize or ""), **env}
    return subprocess.run(
        [sys.executable, str(DRIVER), f"RUN_DIR={run_dir}"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=lambda: os.umask(umask),
    )


def killed(run_dir: Path, when: str, target: Path, nth: int = 1, **kwargs) -> None:
    out = train(run_dir, f"{when}|{target}|{nth}", **kwargs)
    assert out.returncode == -signal.SIGKILL, out.stdout + out.stderr


def best_step(record: dict) -> int:
    """The evaluation whose loss a record calls its best."""
    series = record["val_loss"]
    return series["iters"][series["values"].index(record["best_val_loss"])]


def check_best_is_not_behind(run_dir: Path) -> tuple[int, int, int]:
    """ckpt_best.pt holds weights at least as new as the best that ckpt_latest.pt
    and metrics.json record; returns (best file's step, latest's step, metrics' step)."""
    best = load_checkpoint(run_dir / "ckpt_best.pt")
    latest = load_checkpoint(run_dir / "ckpt_latest.pt")
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert best["metrics"]["val_loss"]["iters"][-1] == best["step"]  # saved at an evaluation
    assert best["metrics"]["best_val_loss"] == best["metrics"]["val_loss"]["values"][-1]
    for record in (latest["metrics"], metrics):
        assert best_step(record) <= best["step"], (best_step(record), best["step"])
    return best["step"], latest["step"], metrics["iterations"]


def temps(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if TEMP.match(p.name))


@pytest.mark.slow  # six training processes; test_checkpoint.py has the fast crash mid-save
def test_kills_between_and_during_checkpoint_writes(tiny_run, tmp_path):
    """Five processes, each SIGKILLed at another point of the evaluation-time writes,
    then one that completes: ckpt_best.pt is never behind the recorded best, killed
    writes' temporaries go on resume, and every record has the umask's mode."""
    nas = tmp_path / "nas"
    run_dir = new_run(tiny_run, tmp_path, "kills", BACKUP_DIR=str(nas))
    mirror = nas / "kills"

    # Killed during the second ckpt_best.pt write (step 4): its whole temporary stays.
    killed(run_dir, "before", run_dir / "ckpt_best.pt", 2, umask=0o002)
    assert check_best_is_not_behind(run_dir) == (2, 2, 2)
    leftover = temps(run_dir)
    assert len(leftover) == 1 and leftover[0].startswith(".ckpt_best.pt.")
    assert (run_dir / leftover[0]).stat().st_size > 100_000  # a whole checkpoint
    others = [".eval.json.0a1b2c3d.tmp", ".config.txt.0a1b2c3d.tmp", "notes.tmp"]
    for name in others:  # not the trainer's files: `make eval` may be writing them
        (run_dir / name).write_text("someone else's")

    # Killed between the two checkpoint writes at the step-4 evaluation (a new best).
    killed(run_dir, "after", run_dir / "ckpt_best.pt", umask=0o002)
    assert check_best_is_not_behind(run_dir) == (4, 2, 2)  # best is ahead, never behind
    assert temps(run_dir) == sorted(others[:2])  # the killed write's temporary is gone

    # Killed after ckpt_latest.pt, before metrics.json: both checkpoints at step 4.
    killed(run_dir, "after", run_dir / "ckpt_latest.pt", umask=0o002)
    assert check_best_is_not_behind(run_dir) == (4, 4, 2)
    assert best_step(load_checkpoint(run_dir / "ckpt_latest.pt")["metrics"]) == 4

    # Killed while copying ckpt_latest.pt to the backup folder (step 6).
    killed(run_dir, "before", mirror / "ckpt_latest.pt", umask=0o002)
    assert check_best_is_not_behind(run_dir) == (6, 6, 6)
    assert [n[:16] for n in temps(mirror)] == [".ckpt_latest.pt."]

    done = train(run_dir, umask=0o002)
    assert done.returncode == 0, done.stdout + done.stderr
    log = (run_dir / "output.log").read_text()
    assert "removed 1 temporary file(s)" in log and ".ckpt_latest.pt." in log
    assert check_best_is_not_behind(run_dir) == (12, 12, 12)
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["status"] == "completed"
    assert metrics["val_loss"]["iters"] == [2, 4, 6, 8, 10, 12]
    assert temps(run_dir) == sorted(others[:2]) and temps(mirror) == []
    assert (run_dir / "notes.tmp").read_text() == "someone else's"
    for name in others:
        (run_dir / name).unlink()
    (run_dir / "config.txt").unlink()  # written by this test, under its own umask
    for folder in (run_dir, mirror):  # umask 002: group-writable, world-readable
        modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in folder.iterdir() if p.is_file()}
        assert {"metrics.json", "ckpt_best.pt", "ckpt_latest.pt", "output.log"} <= set(modes)
        assert modes == dict.fromkeys(modes, 0o664), modes


@pytest.mark.slow  # two training processes; test_checkpoint.py has the fast full-disk paragraph
def test_a_full_disk_is_a_clear_error_and_keeps_the_last_checkpoint(tiny_run, tmp_path):
    """The resumed run's next checkpoint is larger than the file size limit (EFBIG,
    a real failed write): the run fails with one paragraph, in the terminal, output.log
    and metrics.json alike, naming the file, the bytes it needs, which checkpoints are
    intact and what to do; the step-2 checkpoint it resumed from is intact."""
    run_dir = new_run(tiny_run, tmp_path, "full")
    killed(run_dir, "after", run_dir / "metrics.json")
    size = (run_dir / "ckpt_latest.pt").stat().st_size
    out = train(run_dir, fsize=size // 2)
    assert out.returncode == 1, out.stdout + out.stderr
    error = json.loads((run_dir / "metrics.json").read_text())["error"]
    match = re.fullmatch(
        rf"DiskFullError: no space left on device for {re.escape(str(run_dir))}/ckpt_best\.pt "
        rf"\(the file size limit, ulimit -f, was reached\): the checkpoint needs ([\d,]+) bytes "
        rf"and the write stopped after {size // 2:,}\. Unchanged by the failed write: "
        rf"ckpt_latest\.pt \(step 2\) is intact, ckpt_best\.pt \(step 2\) is intact\. Raise "
        rf"the file size limit \(ulimit -f unlimited\); then `make continue "
        rf"RUN={re.escape(str(run_dir.resolve()))}` resumes the run\.",
        error,
    )
    assert match, error
    needed = int(match.group(1).replace(",", ""))
    assert size < needed < 1.01 * size  # the step-2 checkpoint and 2 evaluations' records more
    log = (run_dir / "output.log").read_text()
    failed = [line for line in log.splitlines() if line.startswith("run failed")]
    assert failed == [f"run failed: {error.removeprefix('DiskFullError: ')}"]
    assert failed[0] == log.rstrip().splitlines()[-1]  # nothing after it: no traceback
    assert "Traceback" not in log + out.stdout + out.stderr
    assert load_checkpoint(run_dir / "ckpt_latest.pt")["step"] == 2
    assert load_checkpoint(run_dir / "ckpt_best.pt")["step"] == 2
    assert temps(run_dir) == []


def failed_on_a_full_disk(run_dir: Path, out: subprocess.CompletedProcess, before: Path) -> str:
    """The run failed with one paragraph, the same in the terminal, output.log and
    the record; the record keeps every field it held before the disk filled and
    says failed at step 6. The paragraph."""
    assert out.returncode == 1, out.stdout + out.stderr
    old, record = json.loads(before.read_text()), json.loads((run_dir / "metrics.json").read_text())
    assert old["status"] == "running" and old["iterations"] == 4
    assert set(old) <= set(record) and record["fingerprint"] == old["fingerprint"]
    assert record["status"] == "failed" and record["failed_at_step"] == 6
    message = record["error"].removeprefix("DiskFullError: ")
    shown = (run_dir / "output.log").read_text() + out.stdout + out.stderr  # a full log: terminal
    assert f"run failed: {message}" in shown
    assert "Traceback" not in out.stdout + out.stderr
    return message


def continue_says(run_dir: Path) -> str:
    """What `make continue RUN=<run_dir>` answers (a run without checkpoints: a refusal)."""
    root = Path(__file__).resolve().parents[3]
    out = subprocess.run(
        [sys.executable, "scripts/continue.py", "--run", str(run_dir)],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 2, out.stdout + out.stderr
    return out.stderr


@pytest.mark.slow  # test_full_disk.py drives the same writer (RunMetrics.write) fast
def test_a_full_disk_at_an_evaluation_keeps_every_field_of_the_record(tiny_run, tmp_path):
    """The issue's case: SAVE_CHECKPOINT=n, MONITOR=n, the disk fills (4,096 bytes
    free) after the step-4 record; the step-6 record write fails. The record, all
    the run keeps, is not lost: it holds step 6, every field, status failed, as the
    message says, and `make continue` says the run failed after step 6."""
    run_dir = new_run(tiny_run, tmp_path, "fills", SAVE_CHECKPOINT="n", MONITOR="n")
    before = tmp_path / "before.json"
    out = train(
        run_dir,
        DISK_FULL_AFTER=f"{run_dir / 'metrics.json'}|2|inject",
        DISK_FULL_SNAPSHOT=str(before),
    )
    message = failed_on_a_full_disk(run_dir, out, before)
    record = json.loads((run_dir / "metrics.json").read_text())
    assert record["iterations"] == 6 and record["val_loss"]["iters"] == [2, 4, 6]
    assert re.fullmatch(
        rf"no space left on device for {re.escape(str(run_dir))}/metrics\.json: the record "
        rf"needs [\d,]+ bytes and the disk has 4,096 free with the partial file removed\. "
        rf"metrics\.json holds the record \(step 6\), every field, marked failed with this "
        rf"message \(written over its own bytes: no new file fits\)\. Free at least [\d,]+ "
        rf"more bytes there; the run saves no checkpoints \(SAVE_CHECKPOINT is off\), so "
        rf"`make continue RUN={re.escape(str(run_dir.resolve()))}` cannot resume it and says "
        rf"how to train it again\.",
        message,
    ), message
    assert "(it failed after step 6)" in continue_says(run_dir)
    assert temps(run_dir) == []


@pytest.mark.slow  # test_full_disk.py has the fast one of the monitor's file
def test_a_full_tmpfs_at_the_monitor_file_keeps_every_field_of_the_record(tiny_run, tmp_path):
    """A real 64 MiB tmpfs filled up after the step-4 record (skipped where this
    machine allows neither unshare nor mount): the step-6 summary's cpu_stats.json
    write fails first. Its message gives the bytes needed and free and the `make
    continue`; the record keeps every field of step 4, written over its own bytes."""
    if not shutil.which("unshare"):
        pytest.skip("no unshare command")
    disk = tmp_path / "disk"
    disk.mkdir()
    mount = f"mount -t tmpfs -o size=64m tmpfs {disk}"
    probe = subprocess.run(["unshare", "-rm", "sh", "-c", mount], capture_output=True)
    if probe.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {probe.stderr.decode().strip()}")
    cfg = tiny_run(
        RUN_NAME="tmpfs", GPT2_MAX_ITERS=12, GPT2_EVAL_INTERVAL=2, SAVE_CHECKPOINT="n", MONITOR="y"
    )
    (tmp_path / "config.txt").write_text(cfg.config_text)
    run_dir, after, before = disk / "tmpfs", tmp_path / "after", tmp_path / "before.json"
    env = {
        **os.environ,
        "DISK_FULL_AFTER": f"{run_dir / 'metrics.json'}|2|fill",
        "DISK_FULL_SNAPSHOT": str(before),
    }
    # The tmpfs lives as long as its namespace: the run folder is copied out at the end.
    script = (
        f"{mount} && mkdir {run_dir} && cp {tmp_path / 'config.txt'} {run_dir} || exit 9; "
        f'"$0" "$1" "$2"; code=$?; cp -r {run_dir} {after}; exit $code'
    )
    out = subprocess.run(
        ["unshare", "-rm", "sh", "-c", script, sys.executable, str(DRIVER), f"RUN_DIR={run_dir}"],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    message = failed_on_a_full_disk(after, out, before)
    match = re.fullmatch(
        rf"no space left on device for {re.escape(str(run_dir))}/cpu_stats\.json: the file "
        rf"needs ([\d,]+) bytes and the disk has ([\d,]+) free with the partial file "
        rf"removed\. cpu_stats\.json keeps its earlier version, unchanged\. Free at least "
        rf"([\d,]+) more bytes there; the run saves no checkpoints \(SAVE_CHECKPOINT is off\), "
        rf"so `make continue RUN={re.escape(str(run_dir.resolve()))}` cannot resume it and says "
        rf"how to train it again\.",
        message,
    )
    assert match, message
    needed, free, short = (int(g.replace(",", "")) for g in match.groups())
    record = json.loads((after / "metrics.json").read_text())
    assert record["iterations"] == 4 and record == {
        **json.loads(before.read_text()),
        "status": "failed",
        "failed_at_step": 6,
        "error": f"DiskFullError: {message}",
    }
    assert "(it failed after step 6)" in continue_says(after)
    assert free < 4096 and short == needed - free


TMPFS_WRITER = """
import sys, torch
from lib.atomic import DiskFullError
from lib.run.checkpoint import load_checkpoint, save_checkpoint
path = sys.argv[1] + "/ckpt_latest.pt"
state = {"step": 1, "model": {"w": torch.zeros(20_000)}, "optimizer": {}, "model_config": {},
         "family": "gpt2"}
save_checkpoint(path, state)                      # 80 KB: fits
state.update(step=2, model={"w": torch.zeros(500_000)})
try:
    save_checkpoint(path, state)                  # 2 MB: does not
except DiskFullError as err:
    print(err)
print("step", load_checkpoint(path)["step"])
"""


def test_no_space_left_on_a_real_small_filesystem(tmp_path):
    """ENOSPC from a 1 MiB tmpfs, mounted in a private mount namespace (skipped where
    this machine allows neither unshare nor mount)."""
    if not shutil.which("unshare"):
        pytest.skip("no unshare command")
    disk = tmp_path / "disk"
    disk.mkdir()
    root = Path(__file__).resolve().parents[3]
    mount = f"mount -t tmpfs -o size=1m tmpfs {disk}"
    probe = subprocess.run(["unshare", "-rm", "sh", "-c", mount], capture_output=True)
    if probe.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {probe.stderr.decode().strip()}")
    out = subprocess.run(
        [
            "unshare",
            "-rm",
            "sh",
            "-c",
            f'{mount} && exec "$0" -c "$1" "$2"',
            sys.executable,
            TMPFS_WRITER,
            str(disk),
        ],
        capture_output=True,
        text=True,
        cwd=root,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(root)},
    )
    assert out.returncode == 0, out.stderr
    message, step = out.stdout.strip().splitlines()
    match = re.fullmatch(
        rf"no space left on device for {re.escape(str(disk))}/ckpt_latest\.pt: "
        r"the checkpoint needs ([\d,]+) bytes and the disk has ([\d,]+) free "
        r"with the partial file removed\. Unchanged by the failed write: "
        r"ckpt_latest\.pt \(step 1\) is intact\. Free at least ([\d,]+) "
        r"more bytes there\.",
        message,
    )
    assert match, message
    needed, free, short = (int(g.replace(",", "")) for g in match.groups())
    assert 2_000_000 < needed < 2_010_000  # 500,000 float32s and the pickle around them
    assert 900_000 < free < 1 << 20  # 1 MiB less the old 80 KB, the partial file removed
    assert short == needed - free
    assert step == "step 1"  # the older checkpoint is intact


def write_records(root: Path) -> None:
    """A checkpoint, metrics.json, config.txt, matrix.json and the backup's copies."""
    run = root / "run"
    save_checkpoint(
        run / "ckpt_latest.pt",
        {"step": 1, "model": {}, "optimizer": {}, "model_config": {}, "family": "gpt2"},
    )
    write_json_atomic(run / "metrics.json", {"status": "running"})
    write_text_atomic(run / "config.txt", "CONFIG_X=y\n")
    write_json_atomic(root / "matrix.json", {"runs": []})
    Backup(str(root / "nas"), run).mirror()


@pytest.mark.parametrize("umask, mode", [(0o002, 0o664), (0o022, 0o644), (0o077, 0o600)])
def test_records_are_written_with_the_umask(tmp_path, umask, mode):
    """In this process, under the umask (nothing caches it: each write asks open())."""
    before = os.umask(umask)
    try:
        write_records(tmp_path)
    finally:
        os.umask(before)
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert len(files) == 7  # 3 records, their 3 mirrored copies, matrix.json, nothing else
    assert {p.name: stat.S_IMODE(p.stat().st_mode) for p in files} == {p.name: mode for p in files}


def test_stale_temporaries_of_named_files_only(tmp_path):
    """A write killed in another process (the temporary a kill leaves) is cleared;
    other files' temporaries, and the files themselves, are not."""
    target = tmp_path / "metrics.json"
    write_json_atomic(target, {"v": 1})
    child = subprocess.run(
        [
            sys.executable,
            "-c",
            "import os, signal, sys; from lib.atomic import write_atomic; "
            "write_atomic(sys.argv[1], lambda f: (f.write(b'{'), f.flush(), "
            "os.kill(os.getpid(), signal.SIGKILL)))",
            str(target),
        ],
        cwd=Path(__file__).resolve().parents[3],
        capture_output=True,
    )
    assert child.returncode == -signal.SIGKILL
    (tmp_path / ".eval.json.0123abcd.tmp").write_text("x")
    [stale] = [n for n in temps(tmp_path) if not n.startswith(".eval.json.")]
    assert stale.startswith(".metrics.json.") and (tmp_path / stale).read_bytes() == b"{"
    assert remove_stale_temps(tmp_path, ("metrics.json", "ckpt_best.pt")) == [(tmp_path / stale, 1)]
    assert sorted(p.name for p in tmp_path.iterdir()) == [".eval.json.0123abcd.tmp", "metrics.json"]
    assert json.loads(target.read_text()) == {"v": 1}
