"""Records that parse but have wrong types: each becomes an
"invalid" row naming the file and the field while the other runs are summarised;
and a summary that fails part way leaves the previous outputs byte-identical."""

from __future__ import annotations

import csv
import io
import json
import os
import time
from pathlib import Path

import pytest

from lib.jobs.state import MatrixState
from lib.results import plots
from lib.results.report import FILE as REPORT
from lib.results.report import build_report
from lib.results.summary import compare_runs, summarize
from tests.lib.results.conftest import make_run
from tests.scriptrun import run_script_here

ROOT = Path(__file__).resolve().parents[3]
CURVE = {"iters": [20], "values": [4.0]}
STATUS_MUST = "status must be one of starting, running, completed, stopped, diverged, failed"

# run name -> (metrics.json fields over a good record, the reason expected after the path)
BAD_METRICS = {
    "bad_status": ({"status": 5}, f"metrics.json: {STATUS_MUST}, got 5"),
    "bad_iters": (
        {"val_loss": {"iters": "x", "values": [4.0]}},
        "metrics.json: val_loss.iters must be a list of integers >= 0, got 'x'",
    ),
    "bad_lengths": (
        {"val_loss": {"iters": [10, 20, 30], "values": [5.0, 4.0]}},
        "metrics.json: val_loss.iters and val_loss.values must have equal lengths, got 3 and 2",
    ),
    "bad_nan": (
        {"best_val_perplexity": float("nan")},
        "metrics.json: best_val_perplexity must be a finite number or null, got nan",
    ),
    "bad_monitor": (
        {"monitor": [51.4, 96.0]},
        "metrics.json: monitor must be an object or null, got [51.4, 96.0]",
    ),
    "bad_params": (
        {"params": "big", "sparsity_series": {"iters": [1], "values": ["x"]}},
        "metrics.json: params must be an integer >= 0 or null, got 'big' (and 1 more problem)",
    ),
}


# Draft PNGs (conftest.py): these tests check what is drawn, not its resolution or margins.
pytestmark = pytest.mark.usefixtures("draft_figures")


@pytest.fixture
def runs(tmp_path) -> Path:
    """Two good runs, one per bad metrics.json above, a good run with a bad eval.json
    and a pretrained folder whose eval.json has a list for its model."""
    root = tmp_path / "runs"
    make_run(root, "good_dense", 100.0)
    make_run(root, "good_pruned", 120.0, method="magnitude")
    for name, (fields, _) in BAD_METRICS.items():
        make_run(root, name, 90.0, **fields)
    bad_eval = make_run(root, "bad_eval", 95.0)
    (bad_eval / "eval.json").write_text(
        json.dumps(
            {"format": 1, "sets": {"val": {"skipped": "no val split"}, "wikitext-2": [42.5]}}
        )
    )
    (root / "baseline-gpt2").mkdir()
    (root / "baseline-gpt2" / "eval.json").write_text(
        json.dumps(
            {
                "format": 1,
                "model": ["gpt2"],
                "sets": {"wikitext-2": {"kind": "perplexity", "perplexity": 30.0}},
            }
        )
    )
    return root


def _reasons(root: Path) -> dict[str, str]:
    expected = {name: f"{root / name}/{reason}" for name, (_, reason) in BAD_METRICS.items()}
    expected["bad_eval"] = (
        f"{root / 'bad_eval' / 'eval.json'}: sets.wikitext-2 must be an object, got [42.5]"
    )
    expected["baseline-gpt2"] = (
        f"{root / 'baseline-gpt2' / 'eval.json'}: model must be an object, got ['gpt2']"
    )
    return expected


def test_wrong_types_become_invalid_rows_naming_file_and_field(runs):
    md, files, rows = summarize(runs)
    by = {r.run_id: r for r in rows}
    for name, reason in _reasons(runs).items():
        assert by[name].status == "invalid", name
        assert by[name].problems[0] == reason
        assert by[name].evals == {}  # nothing of an invalid record is used
        if name in BAD_METRICS:
            assert by[name].best_ppl is None and by[name].metrics == {}
        line = next(x for x in md.splitlines() if x.startswith(f"| {name} |"))
        assert line.endswith(f"| invalid ({reason}) |")
    # the good runs are summarised as usual, against the dense baseline
    assert (by["good_dense"].status, by["good_dense"].best_ppl) == ("completed", 100.0)
    assert by["bad_eval"].best_ppl == 95.0  # its metrics.json is valid and still shown
    assert by["good_pruned"].delta_pct == pytest.approx(20.0)
    assert "| good_pruned | adamw | magnitude | 50.0 | vanilla | 120.00 | 121.00 | +20.0 |" in md
    header = (runs / "summary.md").read_text().splitlines()[2]
    assert header.startswith("10 runs: 8 invalid, 2 completed.")
    table = {t["run"]: t for t in csv.DictReader(io.StringIO((runs / "summary.csv").read_text()))}
    assert (
        table["bad_status"]["status"].startswith("invalid (")
        and table["good_dense"]["best ppl"] == "100"
    )
    # LaTeX rows are named by configuration; runs of the same one by their id besides
    assert r"AdamW dense [bad\_lengths] & adamw" in (runs / "summary.tex").read_text()
    assert {f.name for f in files} >= {"summary.md", "val_loss.png", "ppl_vs_sparsity.png"}
    # written with the user's umask, like every other file of a results folder
    umask = os.umask(0)
    os.umask(umask)
    assert (runs / "summary.md").stat().st_mode & 0o777 == 0o666 & ~umask


def test_script_prints_each_invalid_run_and_succeeds(runs, capsys, monkeypatch):
    out = run_script_here(capsys, monkeypatch, "scripts/results.py", "summary", "--dir", str(runs))
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr
    warnings = [x for x in out.stderr.splitlines() if x.startswith("warning:")]
    assert sorted(warnings) == sorted(
        f"warning: {name} is invalid: {reason}" for name, reason in _reasons(runs).items()
    )
    assert "| good_dense | adamw | none | - | vanilla | 100.00 |" in out.stdout


def test_truncated_or_non_object_metrics_is_invalid_with_a_warning(tmp_path, capsys, monkeypatch):
    root = tmp_path / "runs"
    make_run(root, "good", 100.0)
    truncated = make_run(root, "truncated", 100.0) / "metrics.json"
    truncated.write_text(truncated.read_text()[:40])  # cut mid-write by an older version
    make_run(root, "a_list", None, metrics="[1, 2]")
    out = run_script_here(capsys, monkeypatch, "scripts/results.py", "summary", "--dir", str(root))
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
    try:
        json.loads(truncated.read_text())
    except ValueError as err:
        why = str(err)
    assert out.stderr.splitlines() == [
        f"warning: a_list is invalid: {root / 'a_list' / 'metrics.json'}: must be a JSON "
        f"object, got list",
        f"warning: truncated is invalid: {truncated}: not readable as JSON ({why})",
    ]
    assert f"| truncated | adamw | none | - | vanilla |{' - |' * 7} invalid (" in out.stdout


def test_report_and_compare_show_invalid_rows(runs, tmp_path):
    page = build_report(runs)[0].read_text()
    assert "invalid (" in page and "val_loss.iters must be a list of integers" in page
    md, _, rows = compare_runs(
        runs, [str(runs / "good_dense"), str(runs / "bad_nan")], tmp_path / "cmp"
    )
    assert [r.status for r in rows] == ["completed", "invalid"]
    assert "best_val_perplexity must be a finite number or null, got nan" in md


def test_matrix_run_entry_and_matrix_fields(matrix, capsys, monkeypatch):
    state = MatrixState.load(matrix)
    state.update("gpt2_adamw_magnitude_90", overrides="PRUNING_TARGET_SPARSITY=0.9")
    state.update("gpt2_adamw_magnitude_50", error=["oom"])
    _, _, rows = summarize(matrix)
    by = {r.run_id: r for r in rows}
    path = matrix / "matrix.json"
    assert by["gpt2_adamw_magnitude_90"].problems[0] == (
        f"{path}: runs.gpt2_adamw_magnitude_90.overrides must be a list of 'SYMBOL=value' "
        f"strings, got 'PRUNING_TARGET_SPARSITY=0.9'"
    )
    assert by["gpt2_adamw_magnitude_50"].problems[0] == (
        f"{path}: runs.gpt2_adamw_magnitude_50.error must be a string or null, got ['oom']"
    )
    assert by["gpt2_adamw_none"].status == "completed"
    # A matrix-wide field the summary depends on: one error line, nothing written.
    before = (matrix / "summary.md").read_bytes()
    data = json.loads(path.read_text())
    data["sweep"] = {"params": 5}
    path.write_text(json.dumps(data))
    out = run_script_here(
        capsys, monkeypatch, "scripts/results.py", "summary", "--dir", str(matrix)
    )
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.startswith(f"error: {path}: sweep.params must be a list of strings, got 5")
    assert (matrix / "summary.md").read_bytes() == before


def test_a_run_id_leading_out_of_the_matrix_is_invalid_and_nothing_there_is_read(matrix):
    """An edited matrix.json naming ../elsewhere: the row says so, and the completed run
    that folder holds (outside the matrix) lends it no figures."""
    make_run(matrix.parent, "elsewhere", 80.0)
    path = matrix / "matrix.json"
    data = json.loads(path.read_text())
    data["runs"]["../elsewhere"] = data["runs"].pop("gpt2_adamw_magnitude_90")
    path.write_text(json.dumps(data))
    _, _, rows = summarize(matrix)
    by = {r.run_id: r for r in rows}
    outside = by["../elsewhere"]
    assert outside.status == "invalid"
    assert outside.problems[0] == f"{path}: run '../elsewhere' is not a folder inside the matrix"
    assert (outside.best_ppl, outside.optimizer, outside.metrics) == (None, None, {})
    assert by["gpt2_adamw_none"].status == "completed" and by["gpt2_adamw_none"].best_ppl
    page = build_report(matrix)[0].read_text()
    assert "run &#x27;../elsewhere&#x27; is not a folder inside the matrix" in page


def _outputs(root: Path) -> dict[str, bytes]:
    return {
        p.name: p.read_bytes()
        for p in root.iterdir()
        if p.is_file() and (p.suffix in (".md", ".csv", ".tex", ".png", ".html"))
    }


def test_failure_mid_summary_leaves_previous_outputs_untouched(matrix, monkeypatch):
    summarize(matrix)
    build_report(matrix)
    stale = matrix / ".summary-left-by-a-kill"
    stale.mkdir()
    os.utime(stale, (time.time() - 7200,) * 2)
    before = _outputs(matrix)
    assert {"summary.md", "summary.csv", "summary.tex", "val_loss.png", REPORT} <= set(before)
    # New numbers, so a summary that got through would change every file.
    (matrix / "gpt2_adamw_none" / "metrics.json").write_text(
        json.dumps(
            {
                "status": "completed",
                "iterations": 5,
                "best_val_loss": 4.25,
                "best_val_perplexity": 70.0,
                "peak_memory_mb": 64.0,
                "tokens_per_sec": 5.0,
                "val_loss": {"iters": [5], "values": [4.2]},
            }
        )
    )

    def broken(*args, **kwargs):  # the last plot write_all draws, after the tables
        raise RuntimeError("plotting failed")

    monkeypatch.setattr(plots, "bars", broken)
    with pytest.raises(RuntimeError, match="plotting failed"):
        summarize(matrix)
    with pytest.raises(RuntimeError, match="plotting failed"):
        build_report(matrix)
    assert _outputs(matrix) == before  # byte-identical
    assert not stale.exists()  # a killed summary's staging folder is swept
    assert not list(matrix.glob(".summary-*"))  # and the failed one's is removed
    monkeypatch.undo()
    md, _, _ = summarize(matrix)
    assert "| 70.00 |" in md and (matrix / "summary.md").read_bytes() != before["summary.md"]


@pytest.mark.parametrize(
    "record, missing",
    [
        ({}, "status"),
        ({"status": "completed", "best_val_loss": 4.0, "val_loss": CURVE}, "iterations"),
        ({"status": "completed", "iterations": 20, "val_loss": CURVE}, "best_val_loss"),
        ({"status": "stopped", "best_val_loss": None}, "iterations"),
    ],
)
def test_a_record_without_what_every_run_records_is_invalid(
    tmp_path, capsys, monkeypatch, record, missing
):
    """{} or a completed record without iterations or best_val_loss is no completed run:
    an invalid row, warned about on stderr, not a completed row without figures."""
    root = tmp_path / "runs"
    make_run(root, "good", 100.0)
    make_run(root, "hollow", None, metrics=json.dumps(record))
    md, _, rows = summarize(root)
    by = {r.run_id: r for r in rows}
    reason = f"{root / 'hollow' / 'metrics.json'}: {missing} is missing"
    assert (by["hollow"].status, by["hollow"].problems[0]) == ("invalid", reason)
    assert by["good"].status == "completed"
    out = run_script_here(capsys, monkeypatch, "scripts/results.py", "summary", "--dir", str(root))
    assert out.returncode == 0 and f"warning: hollow is invalid: {reason}" in out.stderr


def _results_script():
    import importlib.util

    spec = importlib.util.spec_from_file_location("results_script", ROOT / "scripts/results.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_completed_record_without_its_curve_is_invalid_and_warned(tmp_path, capsys):
    """Every completed run the trainer ends writes its validation curve: one without it
    would be listed completed yet missing from every figure."""
    root = tmp_path / "runs"
    make_run(root, "good", 100.0)
    make_run(
        root,
        "curveless",
        None,
        metrics=json.dumps({"status": "completed", "iterations": 20, "best_val_loss": 4.6}),
    )
    make_run(
        root,
        "stopped_early",
        None,
        metrics=json.dumps({"status": "stopped", "iterations": 0, "best_val_loss": None}),
    )
    _, _, rows = summarize(root)
    by = {r.run_id: r for r in rows}
    reason = f"{root / 'curveless' / 'metrics.json'}: val_loss is missing"
    assert (by["curveless"].status, by["curveless"].problems) == ("invalid", [reason])
    assert by["good"].status == "completed" and by["stopped_early"].status == "stopped"
    _results_script().warn_invalid(rows)
    assert capsys.readouterr().err == f"warning: curveless is invalid: {reason}\n"


def test_a_failed_run_may_record_only_its_status_and_error(tmp_path):
    root = tmp_path / "runs"
    make_run(root, "early", None, metrics=json.dumps({"status": "failed", "error": "no data"}))
    _, _, rows = summarize(root)
    assert (rows[0].status, rows[0].problems) == ("failed", ["no data"])
