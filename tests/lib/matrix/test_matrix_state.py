"""matrix.json as `make continue` reads it back: an edited or damaged record is refused
whole, naming each entry it cannot use, and left as it was."""

from __future__ import annotations

import json

import pytest

from lib.jobs.state import MatrixError, MatrixState
from lib.results.collect import collect


def _matrix(tmp_path):
    state = MatrixState.create(
        tmp_path,
        "m",
        {"gpt2_adamw_none": ["OPTIMIZER_ADAMW=y"], "gpt2_muon_none": ["OPTIMIZER_MUON=y"]},
        {"MAX_ITERS": "20"},
        1,
    )
    return state, tmp_path / "matrix.json"


def test_the_record_the_matrix_wrote_reads_back_as_written(tmp_path):
    state, _ = _matrix(tmp_path)
    state.update("gpt2_muon_none", state="completed", attempts=1)
    loaded = MatrixState.load(tmp_path)
    assert loaded.data == state.data
    assert loaded.to_run() == ["gpt2_adamw_none"]


@pytest.mark.parametrize(
    "edit, named",
    [
        (
            lambda d: d["runs"].__setitem__("../elsewhere", d["runs"].pop("gpt2_muon_none")),
            "run '../elsewhere' is not a folder inside the matrix",
        ),
        (
            lambda d: d["runs"].__setitem__("/tmp/elsewhere", d["runs"].pop("gpt2_muon_none")),
            "run '/tmp/elsewhere' is not a folder inside the matrix",
        ),
        (
            lambda d: d["runs"].__setitem__("tune/../..", d["runs"].pop("gpt2_muon_none")),
            "run 'tune/../..' is not a folder inside the matrix",
        ),
        (
            lambda d: d["runs"]["gpt2_adamw_none"].__setitem__("overrides", "OPTIMIZER_ADAMW=y"),
            "runs.gpt2_adamw_none.overrides must be a list of 'SYMBOL=value' strings, "
            "got 'OPTIMIZER_ADAMW=y'",
        ),
        (
            lambda d: d["runs"]["gpt2_adamw_none"].__setitem__("overrides", ["OPTIMIZER"]),
            "runs.gpt2_adamw_none.overrides[0] must be a 'SYMBOL=value' string",
        ),
        (
            lambda d: d["runs"]["gpt2_muon_none"].__setitem__("attempts", "2"),
            "runs.gpt2_muon_none.attempts must be an integer >= 0, got '2'",
        ),
        (
            lambda d: d["runs"]["gpt2_muon_none"].__setitem__("attempts", -1),
            "runs.gpt2_muon_none.attempts must be an integer >= 0, got -1",
        ),
        (
            lambda d: d.__setitem__("overrides", ["MAX_ITERS=20"]),
            "matrix.json: overrides must be an object of strings",
        ),
    ],
)
def test_an_entry_that_cannot_be_used_is_named_and_nothing_changes(tmp_path, edit, named):
    _, path = _matrix(tmp_path)
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))
    before = path.read_bytes()
    with pytest.raises(MatrixError) as err:
        MatrixState.load(tmp_path)
    message = str(err.value)
    assert named in message and "Nothing was changed" in message, message
    assert "\n" not in message
    assert path.read_bytes() == before
    assert not (tmp_path.parent / "elsewhere").exists()


def test_every_problem_is_named_at_once(tmp_path):
    _, path = _matrix(tmp_path)
    data = json.loads(path.read_text())
    data["runs"]["gpt2_adamw_none"]["overrides"] = None
    data["runs"]["gpt2_muon_none"]["attempts"] = 1.5
    path.write_text(json.dumps(data))
    with pytest.raises(MatrixError, match="gpt2_adamw_none.overrides.*; .*gpt2_muon_none.attempts"):
        MatrixState.load(tmp_path)


def test_the_results_read_it_and_show_that_run_invalid(tmp_path):
    """The summary lists the others as they are (lib/results/collect.py checks run by run)."""
    _, path = _matrix(tmp_path)
    data = json.loads(path.read_text())
    data["runs"]["gpt2_muon_none"]["attempts"] = "2"
    path.write_text(json.dumps(data))
    rows = {row.run_id: row for row in collect(tmp_path)[0]}
    assert rows["gpt2_adamw_none"].status == "pending"
    assert (rows["gpt2_muon_none"].status, rows["gpt2_muon_none"].problems[0]) == (
        "invalid",
        f"{path}: runs.gpt2_muon_none.attempts must be an integer >= 0, got '2'",
    )
