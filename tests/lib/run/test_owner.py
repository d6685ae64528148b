"""One live owner per folder (lib/run/owner.py) with real processes: the owner is
seen and refused while alive, and gone the moment it is killed -9; run names
that leave the results folder are refused."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from lib.config.kconfig import ROOT
from lib.run import owner
from lib.run.rundir import RunDirError, check_run_name, find_run_dir

HOLD = (
    "import sys, time; sys.path.insert(0, sys.argv[2]); from lib.run import owner; "
    "owner.claim(sys.argv[1], lambda h: 'busy'); print('held', flush=True); time.sleep(60)"
)


def _holder(folder: Path) -> subprocess.Popen:
    """A separate process that owns folder until it is killed."""
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(folder), str(ROOT)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_a_live_owner_is_seen_and_refused_and_kill_9_frees_the_folder(tmp_path):
    proc = _holder(tmp_path)
    try:
        record = owner.owner(tmp_path)
        assert record["pid"] == proc.pid and "-c" in record["command"]
        with pytest.raises(owner.Busy) as err:
            owner.claim(tmp_path, lambda h: f"owned by PID {h['pid']}")
        assert str(err.value) == f"owned by PID {proc.pid}"
        assert owner.owner(tmp_path)["pid"] == proc.pid  # a refused claim changes nothing
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    # The lock file stays, still naming the dead PID: the kernel dropped the lock.
    assert json.loads((tmp_path / owner.LOCK).read_text())["pid"] == proc.pid
    assert owner.owner(tmp_path) is None
    assert owner.claim(tmp_path, lambda h: "busy") is True
    assert owner.owner(tmp_path)["pid"] == os.getpid()
    assert owner.claim(tmp_path, lambda h: "busy") is False  # already ours
    owner.release(tmp_path)
    assert owner.owner(tmp_path) is None


def test_owning_releases_at_the_end_of_the_block_and_a_probe_never_blocks_a_claim(tmp_path):
    with owner.owning(tmp_path, lambda h: "busy"):
        assert owner.owner(tmp_path)["pid"] == os.getpid()
    assert owner.owner(tmp_path) is None
    # Another process probing in a tight loop must not make a claim fail. The claims run
    # while it probes, by handshake: it says when it has probed once, and probes on
    # until the stop file exists (no sleep hoping that the two overlap).
    stop = tmp_path.parent / f"{tmp_path.name}.stop"
    probe = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import os, sys; sys.path.insert(0, sys.argv[2]); "
            "from lib.run import owner\nowner.owner(sys.argv[1]); print('probing', flush=True)\n"
            "while not os.path.exists(sys.argv[3]): owner.owner(sys.argv[1])",
            str(tmp_path),
            str(ROOT),
            str(stop),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert probe.stdout.readline() == "probing\n"
        for _ in range(20):
            assert owner.claim(tmp_path, lambda h: "busy") is True
            owner.release(tmp_path)
        assert probe.poll() is None  # still probing after the last claim
    finally:
        stop.touch()
        probe.wait(timeout=60)


@pytest.mark.parametrize(
    "name, ok",
    [
        ("run1", "run1"),
        ("matrix_20250101-120000/gpt2_adamw_none", None),
        ("run1/", "run1"),
        ("../x", False),
        ("/tmp/x", False),
        ("a/../b", False),
        ("..", False),
        (".hidden", False),
        ("a/b/c", False),
        ("x\n", False),
        ("~/x", False),
        ("a b", False),
        ("", False),
    ],
)
def test_run_names_stay_under_the_results_folder(tmp_path, name, ok):
    if ok is False:
        with pytest.raises(RunDirError, match="is not a run name"):
            check_run_name(name, tmp_path)
    else:
        assert check_run_name(name, tmp_path) == (ok or name)


def test_a_link_out_of_the_results_folder_is_refused(tmp_path):
    outside, results = tmp_path / "outside", tmp_path / "results"
    outside.mkdir()
    (outside / "config.txt").write_text("")
    results.mkdir()
    (results / "escape").symlink_to(outside)
    with pytest.raises(RunDirError, match="outside the results folder"):
        find_run_dir(results, "escape")
    (results / "real").mkdir()
    with pytest.raises(RunDirError, match="no run named 'nope'.* matrices under .*: real$"):
        find_run_dir(results, "nope")
