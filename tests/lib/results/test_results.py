"""`make results` / `make compare` on hand-made run folders: numbers, damaged
records, eval.json, and every output file."""
from __future__ import annotations

import csv
import io
import json

import pytest

from lib.results.summary import compare, summarize
from tests.lib.results.conftest import make_run


def test_summary_numbers_statuses_and_files(matrix):
    md, files, rows = summarize(matrix)
    by = {r.run_id: r for r in rows}
    assert by["gpt2_adamw_magnitude_50"].delta_pct == pytest.approx(10.0)
    assert by["gpt2_adamw_magnitude_90"].delta_pct == pytest.approx(50.0)
    assert by["gpt2_adamw_none"].memory_x_weights == pytest.approx(512 * 2**20 / (4 * 2**25))
    assert "malformed" in " ".join(by["gpt2_adamwspam_none"].problems)
    assert by["gpt2_adamwprune_bitter7_state_50"].status == "pending"
    assert "no metrics.json" in by["gpt2_adamwprune_bitter7_state_50"].problems[0]
    assert "| gpt2_adamw_magnitude_90 | adamw | magnitude | 90.0 | vanilla | 150.00 | 151.00 " \
           "| +50.0 |" in md
    names = {f.name for f in files}
    assert {"summary.md", "summary.csv", "summary.tex", "val_loss.png", "ppl_vs_sparsity.png",
            "memory.png", "throughput.png"} <= names
    table = list(csv.DictReader(io.StringIO((matrix / "summary.csv").read_text())))
    assert len(table) == 5
    assert float({t["run"]: t for t in table}["gpt2_adamw_magnitude_90"]["delta %"]) == 50.0
    tex = (matrix / "summary.tex").read_text()
    assert r"\toprule" in tex and r"gpt2\_adamw\_magnitude\_90" in tex


def test_named_baseline_and_unknown_baseline(matrix):
    _, _, rows = summarize(matrix, baseline="gpt2_adamw_magnitude_50")
    assert {r.run_id: r.delta_pct for r in rows}["gpt2_adamw_none"] == pytest.approx(
        100 * (100 / 110 - 1))
    with pytest.raises(ValueError, match="BASELINE=nope"):
        summarize(matrix, baseline="nope")


def test_eval_json_becomes_a_column(matrix):
    (matrix / "gpt2_adamw_none" / "eval.json").write_text(json.dumps(
        {"format": 1, "sets": {"wikitext-2": {"kind": "perplexity", "perplexity": 42.5}}}))
    md, _, _ = summarize(matrix)
    assert "wikitext-2 ppl" in md and "| 42.50 |" in md


def test_compare_runs_from_different_folders(tmp_path):
    a = make_run(tmp_path / "results" / "one", "gpt2_adamw_none", 80.0)
    make_run(tmp_path / "results" / "two", "gpt2_adamw_magnitude_50", 88.0, method="magnitude")
    md, files = compare(tmp_path / "results", [str(a), "gpt2_adamw_magnitude_50"],
                        tmp_path / "out")
    assert "+10.0" in md and (tmp_path / "out" / "summary.md").exists()
    with pytest.raises(FileNotFoundError, match="no run named 'ghost'"):
        compare(tmp_path / "results", ["gpt2_adamw_none", "ghost"], tmp_path / "out")


def test_pretrained_baseline_folder_compares_with_runs(tmp_path):
    run = make_run(tmp_path / "results", "gpt2_adamw_none", 80.0)
    (run / "eval.json").write_text(json.dumps(
        {"format": 1, "sets": {"wikitext-2": {"kind": "perplexity", "perplexity": 60.0}}}))
    base = tmp_path / "results" / "baseline-gpt2"
    base.mkdir()
    (base / "eval.json").write_text(json.dumps(
        {"format": 1, "model": {"family": "gpt2", "source": "pretrained", "params": 124439808},
         "sets": {"wikitext-2": {"kind": "perplexity", "perplexity": 30.0}}}))
    md, _ = compare(tmp_path / "results", ["gpt2_adamw_none", "baseline-gpt2"], tmp_path / "o")
    assert "| baseline-gpt2 | - | none |" in md and "| 30.00 | pretrained |" in md


def test_monitor_summary_becomes_columns(tmp_path):
    root = tmp_path / "runs"
    make_run(root, "gpt2_adamw_none", 80.0,
             monitor={"backend": "nvml", "gpu_util_mean": 51.4, "gpu_util_max": 96.0,
                      "power_w_mean": 406.7, "power_w_max": 658.8, "cpu_percent_mean": 84.9,
                      "rss_mb_max": 1470.0})
    make_run(root, "gpt2_adamw_magnitude_50", 88.0, method="magnitude")
    md, _, _ = summarize(root)
    header = next(line for line in md.splitlines() if line.startswith("| run |"))
    assert "GPU util % mean | GPU util % max | power W mean | power W max" in header
    row = next(line for line in md.splitlines() if line.startswith("| gpt2_adamw_none |"))
    assert "| 51 | 96 | 407 | 659 | 85 | 1470 |" in row
