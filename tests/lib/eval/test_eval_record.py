"""eval.json: written by make eval, read tolerantly by make results."""
from __future__ import annotations

import json

from lib.eval.record import EVAL_FILE, FORMAT, eval_columns, load_eval, write_eval

SETS = {"val": {"kind": "perplexity", "perplexity": 358.2, "tokens": 1000, "word_perplexity": None},
        "lambada": {"kind": "last_word", "accuracy": 0.25, "perplexity": 80.5, "examples": 4},
        "wikitext-2": {"skipped": "not asked"}}


def test_written_record_loads_back_with_its_columns(tmp_path):
    write_eval(tmp_path, {"run_id": "r", "sets": SETS})
    record = load_eval(tmp_path)
    assert record["format"] == FORMAT and record["sets"] == SETS
    assert eval_columns(record) == {"eval_val_ppl": 358.2, "eval_val_tokens": 1000,
                                    "eval_lambada_acc": 0.25, "eval_lambada_ppl": 80.5}


def test_missing_file_is_none(tmp_path):
    assert load_eval(tmp_path) is None and load_eval(tmp_path / "no-such-run") is None
    assert eval_columns(None) == {}


def test_malformed_files_give_an_error_entry_and_no_columns(tmp_path):
    cases = {"truncated": '{"format": 1, "sets": {', "list": "[1, 2]",
             "old": json.dumps({"format": 0, "sets": {}}), "nosets": json.dumps({"format": 1}),
             "binary": b"\xff\xfe\x00"}
    for name, content in cases.items():
        run = tmp_path / name
        run.mkdir()
        path = run / EVAL_FILE
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
        record = load_eval(run)
        assert set(record) == {"error"} and str(path) in record["error"], name
        assert eval_columns(record) == {}
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / EVAL_FILE).mkdir()  # a folder where the file should be
    assert "error" in load_eval(tmp_path / "dir")


def test_malformed_entries_are_skipped_by_columns():
    record = {"format": 1, "sets": {"a": "oops", "b": {"perplexity": "high", "accuracy": True},
                                    "c": {"perplexity": 2.0}}}
    assert eval_columns(record) == {"eval_c_ppl": 2.0}
