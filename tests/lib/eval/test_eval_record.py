"""eval.json: written by make eval, read tolerantly by make results."""

from __future__ import annotations

import json

from lib.run.eval_record import EVAL_FILE, FORMAT, load_eval, write_eval

SETS = {
    "val": {"kind": "perplexity", "perplexity": 358.2, "tokens": 1000, "word_perplexity": None},
    "lambada": {"kind": "last_word", "accuracy": 0.25, "perplexity": 80.5, "examples": 4},
    "wikitext-2": {"skipped": "not asked"},
}


def test_written_record_loads_back(tmp_path):
    write_eval(tmp_path, {"run_id": "r", "sets": SETS})
    record = load_eval(tmp_path)
    assert record == {"format": FORMAT, "run_id": "r", "sets": SETS}


def test_missing_file_is_none(tmp_path):
    assert load_eval(tmp_path) is None and load_eval(tmp_path / "no-such-run") is None


def test_malformed_files_give_an_error_entry(tmp_path):
    cases = {
        "truncated": '{"format": 1, "sets": {',
        "list": "[1, 2]",
        "old": json.dumps({"format": 0, "sets": {}}),
        "nosets": json.dumps({"format": 1}),
        "binary": b"\xff\xfe\x00",
    }
    for name, content in cases.items():
        run = tmp_path / name
        run.mkdir()
        path = run / EVAL_FILE
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
        record = load_eval(run)
        assert set(record) == {"error"} and str(path) in record["error"], name
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / EVAL_FILE).mkdir()  # a folder where the file should be
    assert "error" in load_eval(tmp_path / "dir")
