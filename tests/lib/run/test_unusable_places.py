"""Places a run cannot use are one paragraph each, naming the path and what to do:
a full disk under output.log or a record, a RUN_NAME longer than a folder name may
be, a RESULTS_DIR that cannot hold runs (or is full), a results/latest that is not a
link, a pytorch_model.bin that is not plain weights."""

from __future__ import annotations

import errno
import importlib.util
import json
import os
import re
from pathlib import Path

import pytest
import torch

from lib import atomic
from lib.atomic import DiskFullError
from lib.run.checkpoint import CheckpointError
from lib.run.metrics import RunMetrics
from lib.run.rundir import NAME_MAX, RunDirError, RunLog, check_run_name
from lib.train import naming

ROOT = Path(__file__).resolve().parents[3]


def _full(*args, **kwargs):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def disk_full(monkeypatch) -> None:
    """Every atomic write finds no room, as on a full disk."""

    def write(self, data):
        self.error = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        raise self.error

    monkeypatch.setattr(atomic._KeepsWriteError, "write", write)


def test_a_full_disk_under_output_log_leaves_the_run_going(tmp_path, capsys):
    (tmp_path / "config.txt").write_text("")
    log = RunLog(tmp_path / "output.log")
    log("step 1")
    log.file.write = _full  # type: ignore[union-attr,method-assign]
    log("step 2")
    log("step 3")
    log.close()
    err = capsys.readouterr()
    out = err.out + err.err
    assert out.count("warning: cannot append to") == 1
    assert f"{tmp_path / 'output.log'} (No space left on device)" in out
    assert f"`make continue RUN={tmp_path.resolve()}` resumes it" in out
    assert "step 2" in out and "step 3" in out and "Traceback" not in out
    assert (tmp_path / "output.log").read_text() == "step 1\n"


def test_a_full_disk_at_a_record_says_how_to_continue(tmp_path, monkeypatch):
    (tmp_path / "config.txt").write_text("")
    metrics = RunMetrics(tmp_path / "metrics.json", {"tokens_per_iter": 64})
    disk_full(monkeypatch)
    with pytest.raises(DiskFullError) as full:
        metrics.write({"status": "running"})
    message = str(full.value)
    assert message.startswith(f"no space left on device for {tmp_path / 'metrics.json'}: ")
    assert f"then `make continue RUN={tmp_path.resolve()}` resumes the run" in message
    assert full.value.__suppress_context__


def _train_script():
    spec = importlib.util.spec_from_file_location("train_script", ROOT / "scripts" / "train.py")
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


def test_the_failure_record_of_a_full_disk_does_not_stay_running(tmp_path, monkeypatch):
    record = tmp_path / "metrics.json"
    running = {
        "status": "running",
        "iterations": 40,
        "val_loss": {"iters": [20, 40], "values": [4.0, 3.5]},
    }
    record.write_text(json.dumps(running, indent=2))
    disk_full(monkeypatch)
    err = DiskFullError(errno.ENOSPC, "no space left on device at x", "x")
    _train_script()._record_failure(tmp_path, err)
    written = json.loads(record.read_text())
    assert written["status"] == "failed" and written["error"] == f"DiskFullError: {err}"
    assert not list(tmp_path.glob("*.tmp"))


@pytest.mark.parametrize("length", [NAME_MAX + 1, 300])
def test_a_run_name_longer_than_a_folder_name_is_refused(tiny_run, tmp_path, length):
    name = "r" * length
    with pytest.raises(RunDirError) as err:
        naming.create_run_dir(tiny_run(RUN_NAME=name))
    assert f"({length} bytes)" in str(err.value) and "choose a shorter RUN_NAME" in str(err.value)
    with pytest.raises(RunDirError, match=f"at most {NAME_MAX} of them"):
        check_run_name(name, tmp_path)  # `make continue RUN_NAME=` too
    ok = naming.create_run_dir(tiny_run(RUN_NAME="r" * NAME_MAX))
    assert ok.name == "r" * NAME_MAX


def test_a_results_dir_that_cannot_hold_runs_is_one_paragraph(tiny_run, tmp_path, monkeypatch):
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    for place, why in ((a_file, "Not a directory"), (Path("/proc/x"), "No such file")):
        with pytest.raises(RunDirError) as err:
            naming.create_run_dir(tiny_run(RESULTS_DIR=str(place)))
        message = str(err.value)
        assert message.startswith(f"CONFIG_RESULTS_DIR={place}: cannot make the run folder")
        assert why in message and 'SET="RESULTS_DIR=<dir>"' in message
    monkeypatch.setattr(Path, "mkdir", lambda *a, **k: _read_only())
    with pytest.raises(RunDirError, match="Read-only file system"):
        naming.create_run_dir(tiny_run(RESULTS_DIR=str(tmp_path / "ro")))


def _read_only():
    raise OSError(errno.EROFS, os.strerror(errno.EROFS))


class _Runs:
    def __reduce__(self):
        return (os.system, ("touch ran",))


def test_a_crafted_pytorch_model_bin_is_refused_without_torchs_advice(tmp_path):
    from gpt2.hf import read_weights

    torch.save({"wte": _Runs()}, tmp_path / "pytorch_model.bin")
    with pytest.raises(CheckpointError) as err:
        read_weights(tmp_path)
    message = str(err.value)
    assert message.startswith(f"{tmp_path / 'pytorch_model.bin'}: it names posix.system")
    assert "nothing in it was run" in message and "CONFIG_GPT2_INIT_PATH" in message
    assert "weights_only" not in message and not (tmp_path / "ran").exists()
    (tmp_path / "pytorch_model.bin").write_bytes(b"not a zip")
    with pytest.raises(CheckpointError, match="not a readable PyTorch weights file"):
        read_weights(tmp_path)


def test_a_results_dir_that_cannot_hold_a_matrix_is_one_paragraph(tiny_run, tmp_path):
    from lib.matrix import launch

    a_file = tmp_path / "a-file"
    a_file.write_text("")
    with pytest.raises(launch.MatrixError) as err:
        launch.create(tiny_run(RESULTS_DIR=str(a_file)), [], [])
    assert str(err.value).startswith(f"CONFIG_RESULTS_DIR={a_file}: cannot make the matrix folder")
    assert "Not a directory" in str(err.value)


@pytest.mark.parametrize(
    "errno_, says",
    [(errno.ENOSPC, "no space left on device"), (errno.EDQUOT, "disk quota exceeded")],
)
def test_a_full_disk_at_a_new_run_advises_freeing_space(
    tiny_run, tmp_path, monkeypatch, errno_, says
):
    def full(*args, **kwargs):
        raise OSError(errno_, os.strerror(errno_))

    monkeypatch.setattr(Path, "mkdir", full)
    with pytest.raises(RunDirError) as err:
        naming.create_run_dir(tiny_run(RUN_NAME="r"))
    message = str(err.value)
    results = tmp_path / "results"
    assert message.startswith(
        f"CONFIG_RESULTS_DIR={results}: cannot make the run folder {results / 'r'}: {says} ("
    )
    assert re.search(r"\(\d{1,3}(,\d{3})* bytes free on that disk\)", message)
    assert f"`df -h {tmp_path}` shows the disk" in message  # results/ itself is not made yet
    assert "a folder you can write" not in message


@pytest.mark.parametrize("kind", ["folder", "file"])
def test_a_latest_that_is_not_a_link_stops_a_new_run_before_anything_is_made(
    tiny_run, tmp_path, kind
):
    from lib.matrix import launch

    results = tmp_path / "results"
    results.mkdir()
    latest = results / "latest"
    if kind == "folder":
        latest.mkdir()
        (latest / "notes.txt").write_text("mine")
    else:
        latest.write_text("mine")
    for start, error in (
        (lambda: naming.create_run_dir(tiny_run(RUN_NAME="r")), RunDirError),
        (lambda: launch.create(tiny_run(), [], []), launch.MatrixError),
    ):
        with pytest.raises(error) as err:
            start()
        assert str(err.value).startswith(
            f"{latest} is a {kind}, not the link `make` keeps to the newest run or matrix; "
            f"nothing was made and the {kind} was left as it is. Move it out of the way "
        )
        assert [p.name for p in results.iterdir()] == ["latest"]  # no run, no .latest.<pid>
    assert (latest / "notes.txt" if kind == "folder" else latest).read_text() == "mine"


def test_latest_made_a_folder_meanwhile_is_left_with_a_warning(tmp_path, monkeypatch, capsys):
    from lib.run import rundir

    run = tmp_path / "run"
    run.mkdir()
    (tmp_path / "latest").mkdir()
    monkeypatch.setattr(rundir, "latest_in_the_way", lambda results: None)  # checked before
    rundir.point_latest(run)
    assert f"warning: {tmp_path / 'latest'} is no longer a link" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["latest", "run"]
    (tmp_path / "latest").rmdir()
    rundir.point_latest(run)
    assert os.readlink(tmp_path / "latest") == "run"


def test_a_restart_on_a_full_disk_is_one_paragraph_with_the_free_space(tmp_path, monkeypatch):
    """`make continue` of a run without a checkpoint notes the restart in output.log."""
    from lib.run import rundir

    class Full:
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def write(self, text):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    run = tmp_path / "run"
    run.mkdir()
    (run / "output.log").write_text("step 0\n")
    monkeypatch.setattr(rundir, "open_append", lambda path: Full())
    with pytest.raises(RunDirError) as err:
        rundir.resume_point(run)
    message = str(err.value)
    assert message.startswith(f"cannot append to {run / 'output.log'}: no space left on device (")
    assert "bytes free on that disk); nothing was trained" in message
    assert f"`df -h {run}` shows it" in message
    assert message.endswith(f"then `make continue RUN={run.resolve()}` again")
    assert err.value.__suppress_context__ and "\n" not in message
