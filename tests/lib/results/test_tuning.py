"""`make results` and `make report` on a tuned matrix (tests/lib/results/tuned.py):
the tuning table, CSV, LaTeX and curve, malformed records, and the trial runs
under tune/ that no table may show."""

from __future__ import annotations

import csv
import io
import json
import math
import re
from pathlib import Path

import matplotlib.pyplot as plt
import pytest

from lib.jobs.state import MatrixState
from lib.results import plots, style, tables, tuning
from lib.results.collect import collect, load_rows
from lib.results.report import build_report
from lib.results.summary import summarize
from tests.lib.results import tuned as tuned_matrix
from tests.lib.results.tuned import BUDGET_TEXT, LR, STUDIES, tuned, write_record  # noqa: F401
from tests.scriptrun import run_script_here

ROOT = Path(__file__).resolve().parents[3]


# Draft PNGs (conftest.py): these tests check what is drawn, not its resolution or margins.
pytestmark = pytest.mark.usefixtures("draft_figures")


def section(md: str, heading: str) -> str:
    start = md.index(heading)
    end = md.find("\n## ", start + 1)
    return md[start : end if end > 0 else None]


def table(text: str) -> list[dict[str, str]]:
    lines = [line for line in text.splitlines() if line.startswith("|")]
    head = [c.strip() for c in lines[0].strip("|").split("|")]
    return [dict(zip(head, (c.strip() for c in line.strip("|").split("|")))) for line in lines[2:]]


def test_edge_is_where_the_best_value_lies_in_its_range():
    sym = tuning.Symbol("LEARNING_RATE", 1e-4, 1e-2, True, 3e-3)
    assert sym.position() == pytest.approx(math.log10(30) / 2) and sym.edge is None
    assert tuning.Symbol("X", 1e-4, 1e-2, True, 9.5e-3).edge == "high"  # 0.989
    assert tuning.Symbol("X", 1e-4, 1e-2, True, 1.2e-4).edge == "low"  # log10(1.2) / 2 = 0.040
    assert tuning.Symbol("X", 1e-4, 1e-2, True, 1.3e-4).edge is None  # 0.057
    assert tuning.Symbol("W", 0, 200, False, 5).edge == "low"  # 0.025
    assert tuning.Symbol("W", 0, 200, False, 189).edge is None  # 0.945
    assert tuning.Symbol("W", 0, 200, False, None).edge is None  # no complete trial yet


@pytest.fixture(scope="module")
def summarized(tmp_path_factory):
    """tests/lib/results/tuned.py's matrix and what summarize returned, once for the
    module: the tests using it only read them and the files it wrote."""
    root = tuned_matrix.build_tuned(tmp_path_factory.mktemp("tuned"))
    return root, *summarize(root)


def test_tuning_table_of_a_tuned_matrix(summarized):
    _, md, files, rows = summarized
    part = section(md, "## Tuning")
    assert md.index("## Tuning") < md.index("## Seed statistics")
    # The budget, the same for all three, is stated once, with the tuned-baseline sentence.
    assert md.count(BUDGET_TEXT) == 1 and "same budget: " + BUDGET_TEXT in part
    assert "the baseline is the tuned baseline" in part and tuning.EDGE == 0.05
    assert "outer 5 % of its search range" in part
    by = {r["configuration"]: r for r in table(part)}
    assert list(by) == ["gpt2_adamw_none", "gpt2_adamwspam_none", "gpt2_muon_none"]
    assert by["gpt2_adamw_none"] == {
        "configuration": "gpt2_adamw_none",
        "tuned values": "LEARNING_RATE=0.003",
        "search range": "LEARNING_RATE 0.0001 to 0.01 (log)",
        "complete": "4",
        "pruned": "1",
        "failed": "1",
        "running": "0",
        "best trial loss": "2.600 (trial 5)",
        "edge": "",
    }
    muon = by["gpt2_muon_none"]
    assert (muon["complete"], muon["pruned"], muon["failed"], muon["running"]) == (
        "2",
        "2",
        "0",
        "1",
    )
    assert muon["edge"] == "LEARNING_RATE at the high end"  # the record said at_edge false
    assert muon["best trial loss"] == "2.200 (trial 2)"
    spam = by["gpt2_adamwspam_none"]
    assert spam["tuned values"] == "LEARNING_RATE=0.001, GPT2_WARMUP_STEPS=5"
    assert spam["edge"] == "GPT2_WARMUP_STEPS at the low end"
    # The seed statistics name the tuned baseline; no trial run is among the runs.
    assert "**gpt2**: baseline configuration gpt2_adamw_none (tuned: LEARNING_RATE=0.003)." in md
    assert "trial-00" not in md and {r.run_id for r in rows} == {
        f"{c}_s{s}" for c in STUDIES for s in (1, 2)
    }
    names = {p.name for p in files}
    assert {"summary_tuning.csv", "tuning_curve.png"} <= names


def test_tuning_csv_and_latex(summarized):
    tuned, _, files, _ = summarized
    lines = list(csv.DictReader(io.StringIO((tuned / "summary_tuning.csv").read_text())))
    muon = next(r for r in lines if r["configuration"] == "gpt2_muon_none")
    assert (muon["complete"], muon["pruned"], muon["failed"], muon["running"]) == (
        "2",
        "2",
        "0",
        "1",
    )
    assert float(muon["LEARNING_RATE"]) == 9.5e-3 and muon["LEARNING_RATE_edge"] == "high"
    assert (muon["LEARNING_RATE_low"], muon["LEARNING_RATE_log"]) == ("0.0001", "y")
    assert float(muon["best_loss"]) == 2.2 and muon["GPT2_WARMUP_STEPS"] == ""
    assert (muon["trials"], muon["steps_per_trial"], muon["sampler"]) == ("6", "40", "tpe")
    # Every final run's tuned value in summary.csv.
    runs = {r["run"]: r for r in csv.DictReader(io.StringIO((tuned / "summary.csv").read_text()))}
    assert float(runs["gpt2_muon_none_s2"]["tuned LEARNING_RATE"]) == 9.5e-3
    assert runs["gpt2_adamw_none_s1"]["tuned GPT2_WARMUP_STEPS"] == ""
    tex = (tuned / "summary.tex").read_text()
    body = tex[: tex.index(r"\label{tab:tuning}")]
    assert (
        r"Muon dense & LEARNING\_RATE=0.0095 & LEARNING\_RATE 0.0001 to 0.01 (log) & 2 & 2 & 0 & 1 & 2.200 (trial 2) & LEARNING\_RATE at the high end \\"
        in body
    )
    assert tables.tex(BUDGET_TEXT) in tex


def test_tuning_curve_is_the_best_so_far_with_pruned_trials_marked(summarized):
    tuned = summarized[0]
    found = tuning.read(tuned)
    assert found.problems == []
    curves = {s.config: s.curve() for s in found.studies}
    # AdamW: 3.0, 2.8, [pruned 3.5], 2.9, [failed], 2.6 -> 3.0, 2.8, 2.8, 2.6
    assert curves["gpt2_adamw_none"] == tuning.Curve(
        [(0, 3.0), (1, 2.8), (3, 2.8), (5, 2.6)], [(2, 3.5)]
    )
    assert curves["gpt2_muon_none"] == tuning.Curve([(0, 2.5), (2, 2.2)], [(1, 3.1), (3, 2.9)])
    for c in curves.values():
        values = [v for _, v in c.best]
        assert values == sorted(values, reverse=True)  # never rises


def test_tuning_curve_plots_loss_against_each_tuned_value_with_pruned_trials_marked(summarized):
    tuned = summarized[0]
    found = tuning.read(tuned)
    rows, _, _ = load_rows(tuned)
    made = plots.figures(rows, {}, found)
    fig = made["tuning_curve.png"]
    try:
        lr, warmup = fig.axes[:2]  # one panel per tuned symbol, in the records' order
        assert [a.get_visible() for a in fig.axes] == [True, True]
        assert lr.get_xlabel() == "LEARNING_RATE (log scale)" and lr.get_xscale() == "log"
        assert warmup.get_xlabel() == "GPT2_WARMUP_STEPS" and warmup.get_xscale() == "linear"
        assert fig._suptitle.get_text() == (
            "Tuning: each trial's validation loss against its tuned value"
        )
        lines = {line.get_label(): line for line in lr.get_lines()}
        assert [n for n in lines if not n.startswith("_")] == [
            "AdamW dense",
            "AdamW-SPAM dense",
            "Muon dense",
            plots.PRUNED,
            "best trial of its configuration",
        ]
        muon = lines["Muon dense"]  # complete trials: at their learning rates, not numbers
        assert list(muon.get_xdata()) == [5e-3, 9.5e-3] and list(muon.get_ydata()) == [2.5, 2.2]
        marks = [line for line in lr.get_lines() if line.get_label() == "_pruned"]
        assert [(list(m.get_xdata()), list(m.get_ydata()), m.get_color()) for m in marks] == [
            ([5e-4], [3.5], lines["AdamW dense"].get_color()),
            ([2e-4, 1e-3], [3.1, 2.9], muon.get_color()),
        ]
        assert all(m.get_marker() == "x" for m in marks)
        spam = [line for line in warmup.get_lines() if line.get_label() == "AdamW-SPAM dense"]
        assert [list(line.get_xdata()) for line in spam] == [[5]]  # only SPAM tuned the warmup
        fig.canvas.draw()
        sizes = [t.get_fontsize() for t in fig.findobj(plt.Text) if t.get_text().strip()]
        assert min(sizes) >= style.MIN_PT
    finally:
        for f in made.values():
            plt.close(f)


def test_a_malformed_record_is_one_warning_line_naming_it(tuned, capsys, monkeypatch):
    (tuned / "tune" / "gpt2_muon_none" / "tuning.json").write_text('{"config": "gpt2_mu')
    bad_range = [{**LR, "low": 1e-2, "high": 1e-4, "best": 1e-3}]
    write_record(tuned, "gpt2_adamwspam_none", symbols=bad_range)
    found = tuning.read(tuned)
    assert [s.config for s in found.studies] == ["gpt2_adamw_none"]
    assert len(found.problems) == 2
    spam, muon = found.problems
    assert "tune/gpt2_muon_none/tuning.json: not readable as JSON" in muon
    assert (
        "tune/gpt2_adamwspam_none/tuning.json: symbols[0].high must be above low (0.01), got 0.0001"
        in spam
    )
    path = tuned / "tune" / "gpt2_adamw_none" / "tuning.json"
    record = json.loads(path.read_text())
    del record["trials"]
    path.write_text(json.dumps(record))
    # scripts/results.py as `python` runs it, in this process (tests/scriptrun.py)
    out = run_script_here(capsys, monkeypatch, "scripts/results.py", "summary", "--dir", str(tuned))
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
    warnings = out.stderr.splitlines()
    assert len(warnings) == 3 and all(w.startswith("warning: ") for w in warnings), warnings
    assert any("gpt2_adamw_none/tuning.json: trials is missing" in w for w in warnings)
    # No study left: the summary says so under its heading; no tuning table, CSV or figure.
    md = (tuned / "summary.md").read_text()
    assert "## Tuning\n\nNo tuning record could be read:" in md
    assert not (tuned / "summary_tuning.csv").exists()
    assert not (tuned / "tuning_curve.png").exists()


def test_trial_runs_are_never_matrix_runs(tuned):
    rows, matrix = collect(tuned)
    assert "tune/gpt2_adamw_none/trial-000" in matrix["runs"]  # listed, but not a row
    assert not [r for r in rows if "trial" in r.run_id or "tune" in str(r.path)]
    assert len(rows) == 6
    (tuned / "matrix.json").unlink()  # as a folder of runs: tune/ is not one
    rows, _ = collect(tuned)
    assert sorted(r.run_id for r in rows) == sorted(f"{c}_s{s}" for c in STUDIES for s in (1, 2))


def test_an_untuned_matrix_shows_no_tuning(matrix):
    md, files, rows = summarize(matrix)
    assert "## Tuning" not in md and "tuned" not in md.replace(str(matrix), "")
    assert {p.name for p in files} == {
        "summary.md",
        "summary.csv",
        "summary.tex",
        "val_loss.png",
        "ppl_vs_sparsity.png",
        "memory.png",
        "throughput.png",
    }
    assert "tuned" not in (matrix / "summary.csv").read_text().replace(str(matrix), "")
    assert "tuning" not in (matrix / "summary.tex").read_text().lower()
    page = build_report(matrix)[0].read_text().replace(str(matrix), "")
    assert "Tuning" not in page and "tuning_curve" not in page and "tuned" not in page


def test_report_of_a_tuned_matrix(summarized):
    tuned = summarized[0]
    page = build_report(tuned)[0].read_text()
    part = page[page.index("<h2>Tuning</h2>") : page.index("<h2>Seed statistics</h2>")]
    assert BUDGET_TEXT in part and "the baseline is the tuned baseline" in part
    rows = re.findall(r"<tr>(.*?)</tr>", part)
    cells = [c for r in rows if (c := re.findall(r"<td[^>]*>(.*?)</td>", r))]
    assert [c[0] for c in cells] == ["AdamW dense", "AdamW-SPAM dense", "Muon dense"]
    assert cells[2] == [
        "Muon dense",
        "LEARNING_RATE=0.0095",
        "LEARNING_RATE 0.0001 to 0.01 (log)",
        "2",
        "2",
        "0",
        "1",
        "2.200 (trial 2)",
        "LEARNING_RATE at the high end",
    ]
    assert "outer 5 % of its search range" in part
    assert "Tuning: each trial&#x27;s validation loss against its tuned value" in page  # caption
    assert "trial-000" not in page


def test_final_runs_older_than_their_study_are_named(tuned):
    state = MatrixState.load(tuned)
    state.update("gpt2_adamw_none_s2", tuned={"values": {"LEARNING_RATE": 1e-3}})
    md = summarize(tuned)[0]
    assert (
        "- warning: gpt2_adamw_none_s2 ran at LEARNING_RATE=0.001 (the study's best is now "
        "0.003): its study went on after it"
    ) in md


def test_a_budget_of_one_trial_is_said_in_the_singular():
    budget = {"trials": 1, "steps_per_trial": 30, "sampler": "grid", "pruner": "none"}
    assert tuning.budget_text(budget).startswith("1 trial x 30 steps, ")
    assert tuning.budget_text({**budget, "trials": 3}).startswith("3 trials x 30 steps, ")
