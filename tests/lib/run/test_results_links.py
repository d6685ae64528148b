"""Links in a results folder do not lead writes out of it: in a folder a group
shares, anyone can repoint results/latest or put a link in a run folder, so every
command that writes resolves its folder once, keeps it in RESULTS_DIR and appends
without following a final link. A folder the user names (RUN=, RESULTS=) may be
anywhere. Also `latest` that is not a link, and the .config line naming the folder."""

from __future__ import annotations

import errno
import importlib.util
import json
import os
from pathlib import Path

import pytest

from lib.run import owner, rundir
from lib.run.rundir import RunDirError, RunLog, claim_run, resume_point, run_folder
from lib.run.safe_open import open_append

ROOT = Path(__file__).resolve().parents[3]


def script(name: str):
    """scripts/<name>.py as a module, so its main runs in this process."""
    spec = importlib.util.spec_from_file_location(f"{name}_script", ROOT / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def files(folder: Path) -> dict[str, bytes]:
    """Every file under folder (links too, by what they lead to) and its bytes."""
    return {
        str(p.relative_to(folder)): (
            os.readlink(p).encode() if p.is_symlink() else p.read_bytes() if p.is_file() else b"/"
        )
        for p in folder.rglob("*")
    }


def make_run(folder: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / "config.txt").write_text('CONFIG_RESULTS_DIR="results"\n')
    (folder / "metrics.json").write_text(json.dumps({"status": "completed", "iterations": 2}))
    (folder / "output.log").write_text("step 1\n")
    return folder


@pytest.fixture
def shared(tmp_path, monkeypatch) -> tuple[Path, Path]:
    """(results folder of .config, a run outside it that results/latest leads to)."""
    results = tmp_path / "results"
    results.mkdir()
    dot_config = tmp_path / ".config"
    dot_config.write_text(f'CONFIG_RESULTS_DIR="{results}"\n')
    monkeypatch.setattr(rundir, "DOT_CONFIG", dot_config)
    outside = make_run(tmp_path / "someone-else" / "run")
    (results / "latest").symlink_to(outside)
    return results, outside


WRITERS = [
    ("results", ["summary"]),  # summary.md, .csv, .tex, plots
    ("results", ["report"]),  # index.html
    ("export", []),  # hf/
    ("eval", []),  # eval.json
    ("bench", ["inference"]),  # metrics.json
    ("kv_circuit", []),  # kv_circuit/, metrics.json
    ("downstream", []),  # eval.json's lm_eval
    ("continue", []),  # output.log, checkpoints, records
]


@pytest.mark.parametrize(("name", "argv"), WRITERS, ids=[" ".join([n, *a]) for n, a in WRITERS])
def test_a_latest_link_out_of_the_results_folder_writes_nothing_there(shared, name, argv):
    results, outside = shared
    before = files(outside.parent)
    with pytest.raises(RunDirError) as err:
        script(name).main(argv)
    message = str(err.value)
    assert message.startswith(
        f"{results / 'latest'} leads to {outside}, outside the results folder {results}: "
    )
    given = "RESULTS" if name == "results" else "RUN"
    assert message.endswith(f"to use that folder, name it: {given}={outside}")
    assert files(outside.parent) == before
    assert not any(p.name.startswith(".") for p in results.iterdir())  # no lock, no temporary


def test_a_folder_the_user_names_may_be_anywhere(shared, capsys):
    results, outside = shared
    assert run_folder(str(outside)) == outside
    assert script("results").main(["summary", "--dir", str(outside)]) == 0
    assert (outside / "summary.md").is_file()  # what the user asked for
    (results / "latest").unlink()
    inside = make_run(results / "mine")
    (results / "latest").symlink_to("mine")
    assert run_folder(None) == inside
    assert script("results").main(["summary"]) == 0
    assert f"wrote {inside / 'summary.md'}" in capsys.readouterr().out


def test_a_link_in_the_results_folder_to_a_run_in_it_is_followed(shared):
    """reuse links a matrix's run to an earlier one in the same results folder."""
    results, _ = shared
    run = make_run(results / "matrix_a" / "run")
    (results / "matrix_b").mkdir()
    (results / "matrix_b" / "run").symlink_to(run)
    assert rundir.find_run_dir(results, "matrix_b/run") == run


def test_output_log_as_a_link_is_not_appended_through(tmp_path):
    """`make continue` of a run: RunLog and the restart note of a run without a checkpoint."""
    run = make_run(tmp_path / "run")
    elsewhere = tmp_path / "elsewhere.txt"
    elsewhere.write_text("someone's file\n")
    (run / "output.log").unlink()
    (run / "output.log").symlink_to(elsewhere)
    with pytest.raises(RunDirError) as err:
        RunLog(run / "output.log")
    message = str(err.value)
    assert message.startswith(f"{run / 'output.log'} is a symbolic link to {elsewhere}: ")
    assert f"Nothing was written; remove the link (`rm {run / 'output.log'}`)" in message
    with pytest.raises(RunDirError, match="is a symbolic link to"):
        resume_point(run)
    assert elsewhere.read_text() == "someone's file\n"
    (run / "output.log").unlink()  # a plain file again: appended to as before
    log = RunLog(run / "output.log")
    log("step 1")
    log.close()
    assert (run / "output.log").read_text() == "step 1\n"


def test_an_owner_lock_as_a_link_is_not_truncated(tmp_path):
    run = make_run(tmp_path / "run")
    elsewhere = tmp_path / "elsewhere.txt"
    elsewhere.write_text("someone's file\n")
    (run / owner.LOCK).symlink_to(elsewhere)
    with pytest.raises(RunDirError, match=f"{run / owner.LOCK} is a symbolic link"):
        claim_run(run)
    assert elsewhere.read_text() == "someone's file\n"


def test_a_record_as_a_link_is_replaced_not_written_through(tmp_path):
    """eval.json, metrics.json and summaries are written atomically: the new file
    is renamed over the link, and what the link led to is untouched."""
    from lib.run.eval_record import load_eval, write_eval

    run = make_run(tmp_path / "run")
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text("{}")
    (run / "eval.json").symlink_to(elsewhere)
    write_eval(run, {"sets": {}})
    assert not (run / "eval.json").is_symlink() and elsewhere.read_text() == "{}"
    assert load_eval(run) is not None


def test_an_append_through_a_link_fails_and_a_file_is_created_with_the_umask(tmp_path):
    target = tmp_path / "target"
    (tmp_path / "link").symlink_to(target)
    with pytest.raises(OSError) as err:
        open_append(tmp_path / "link")
    assert err.value.errno == errno.ELOOP and not target.exists()
    old = os.umask(0o027)
    try:
        with open_append(tmp_path / "new", "ab") as f:
            f.write(b"x")
    finally:
        os.umask(old)
    assert (tmp_path / "new").stat().st_mode & 0o777 == 0o640


def test_a_matrix_folder_given_as_a_run_names_the_runs_it_holds(tmp_path):
    """`make sample RUN=results/<matrix>`: the refusal names the runs inside."""
    matrix = tmp_path / "matrix_x"
    for name in ("gpt2_adamw_none", "gpt2_adamwspam_none"):
        (matrix / name).mkdir(parents=True)
        (matrix / name / "config.txt").write_text("")
    with pytest.raises(RunDirError) as err:
        run_folder(str(matrix))
    text = str(err.value)
    assert f"{matrix} is not a run folder (no config.txt); it holds runs" in text, text
    assert f"RUN={matrix / 'gpt2_adamw_none'} (of 2: gpt2_adamw_none, gpt2_adamwspam_none)" in text
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(RunDirError, match=r"no config.txt\): train one with `make`"):
        run_folder(str(empty))
