"""`make results` / `make compare` on hand-made run folders: numbers, damaged
records, eval.json, and every output file. The Markdown is parsed back into
tables (lib/results/tables.py's format) and checked cell by cell."""

from __future__ import annotations

import csv
import io
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from lib.config.kconfig import open_tree
from lib.config.run_config import write_outputs
from lib.results.summary import compare, summarize
from tests.lib.results import conftest as results_conftest
from tests.lib.results.conftest import make_run
from tests.scriptrun import run_script_here

ROOT = Path(__file__).resolve().parents[3]

COLUMNS = [
    "run",
    "optimizer",
    "pruning",
    "sparsity",
    "variant",
    "best ppl",
    "final ppl",
    "delta %",
    "tokens/s",
    "peak GiB",
    "mem x weights",
    "wall min",
]  # then extras, status
NUMBERS = COLUMNS[5:]  # "-" in a run without metrics
# The matrix fixture's runs: matrix.json lists them sorted, and rows keep that order.
MATRIX_ORDER = [
    "gpt2_adamw_magnitude_50",
    "gpt2_adamw_magnitude_90",
    "gpt2_adamw_none",
    "gpt2_adamwprune_bitter7_state_50",
    "gpt2_adamwspam_none",
]


@dataclass
class Table:
    model: str  # its "### " heading
    baseline: str  # the run its "Baseline:" line names
    header: list[str]
    rows: list[dict[str, str]]

    def column(self, name: str) -> list[str]:
        return [r[name] for r in self.rows]

    def row(self, run: str) -> dict[str, str]:
        (found,) = [r for r in self.rows if r["run"] == run]
        return found


def _cells(line: str) -> list[str]:
    assert line.startswith("| ") and line.endswith(" |"), line
    return [cell.strip() for cell in line[1:-1].split("|")]


def parse_tables(md: str) -> list[Table]:
    """Each "### model" section of md as a Table: header row, a separator of one
    "---" per column, data rows with as many cells as the header."""
    tables = []
    for section in re.split(r"^### ", md, flags=re.M)[1:]:
        lines = section.splitlines()
        baseline = re.fullmatch(
            r"Baseline: (.+?); delta % is best perplexity relative to it \(a seeded run: to "
            r"its seed's baseline run\); sparsity is the final measured share of zeros among "
            r"the prunable weights, the blocks' matrices \(embeddings are never pruned; the "
            r"target where the run has none\)\.",
            lines[2],
        )
        assert lines[1] == "" and baseline, lines[:3]
        start = next(i for i, line in enumerate(lines) if line.startswith("|"))
        end = next(
            (i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines)
        )
        assert not any(line.startswith("|") for line in lines[end:])  # one table a section
        header = _cells(lines[start])
        assert lines[start + 1] == "|" + "|".join(["---"] * len(header)) + "|"
        rows = [_cells(line) for line in lines[start + 2 : end]]
        assert all(len(r) == len(header) for r in rows), rows
        tables.append(
            Table(lines[0], baseline.group(1), header, [dict(zip(header, r)) for r in rows])
        )
    return tables


def expected_numbers(run: Path, base_best: float) -> dict[str, str]:
    """The number cells of a completed run, from its metrics.json as the fixture
    wrote it; best perplexity is exp of the lowest validation loss."""
    m = json.loads((run / "metrics.json").read_text())
    best = math.exp(min(m["val_loss"]["values"]))
    assert f"{best:.2f}" == f"{m['best_val_perplexity']:.2f}"  # the fixture is consistent
    return {
        "best ppl": f"{best:.2f}",
        "final ppl": f"{m['final_val_perplexity']:.2f}",
        "delta %": f"{100 * (best / base_best - 1):+.1f}",
        "tokens/s": f"{m['tokens_per_sec']:,.0f}",
        "peak GiB": f"{m['peak_memory_mb'] / 1024:.2f}",
        "mem x weights": f"{m['peak_memory_mb'] * 2**20 / (4 * m['params']):.1f}",
        "wall min": f"{m['wall_time_s'] / 60:.1f}",
    }


# Draft PNGs (conftest.py): these tests check what is drawn, not its resolution or margins.
pytestmark = pytest.mark.usefixtures("draft_figures")


@pytest.fixture(scope="module")
def summarized(tmp_path_factory):
    """conftest's matrix and what summarize(matrix) returned, once for the module:
    the tests using it only read them and the files it wrote."""
    matrix = results_conftest.build_matrix(tmp_path_factory.mktemp("summarized"))
    return matrix, *summarize(matrix)


def test_markdown_table_of_a_matrix(summarized):
    matrix, md, _, _ = summarized
    (table,) = parse_tables(md)
    assert (table.model, table.baseline) == ("gpt2", "gpt2_adamw_none")
    assert table.header == COLUMNS + ["status"]
    assert table.column("run") == MATRIX_ORDER
    assert table.column("optimizer") == ["adamw", "adamw", "adamw", "adamwprune", "adamwspam"]
    assert table.column("pruning") == ["magnitude", "magnitude", "none", "state", "none"]
    # No run measured its sparsity, so the column shows the target in %.
    assert table.column("sparsity") == ["50.0", "90.0", "-", "50.0", "-"]
    assert table.column("variant") == ["vanilla", "vanilla", "vanilla", "bitter7", "vanilla"]
    base_best = math.exp(
        min(
            json.loads((matrix / "gpt2_adamw_none" / "metrics.json").read_text())["val_loss"][
                "values"
            ]
        )
    )
    for run in MATRIX_ORDER[:3]:
        row = table.row(run)
        assert {c: row[c] for c in NUMBERS} == expected_numbers(matrix / run, base_best), run
    assert list(table.row("gpt2_adamw_magnitude_90").values()) == [
        "gpt2_adamw_magnitude_90",
        "adamw",
        "magnitude",
        "90.0",
        "vanilla",
        "150.00",
        "151.00",
        "+50.0",
        "1,000",
        "0.50",
        "4.0",
        "2.0",
        "completed",
    ]
    assert table.column("delta %")[:3] == ["+10.0", "+50.0", "+0.0"]
    for run in MATRIX_ORDER[3:]:
        assert [table.row(run)[c] for c in NUMBERS] == ["-"] * len(NUMBERS), run
    try:
        json.loads("{broken")
    except ValueError as err:
        malformed = str(err)
    # A truncated metrics.json makes its run invalid, naming the file (matrix.json said failed).
    assert table.column("status") == [
        "completed",
        "completed",
        "completed",
        "pending (no metrics.json (never reached its first evaluation))",
        f"invalid ({matrix / 'gpt2_adamwspam_none' / 'metrics.json'}: not readable as JSON "
        f"({malformed}))",
    ]


def test_summary_rows_and_files(summarized):
    matrix, md, files, rows = summarized
    by = {r.run_id: r for r in rows}
    assert [r.run_id for r in rows] == MATRIX_ORDER
    assert by["gpt2_adamw_magnitude_50"].delta_pct == pytest.approx(10.0)
    assert by["gpt2_adamw_magnitude_90"].delta_pct == pytest.approx(50.0)
    assert by["gpt2_adamw_none"].memory_x_weights == pytest.approx(512 * 2**20 / (4 * 2**25))
    assert [r.status for r in rows] == ["completed"] * 3 + ["pending", "invalid"]
    assert {f.name for f in files} == {
        "summary.md",
        "summary.csv",
        "summary.tex",
        "val_loss.png",
        "ppl_vs_sparsity.png",
        "memory.png",
        "throughput.png",
    }
    # summary.md is a header with the run counts, then the table summarize returned.
    text = (matrix / "summary.md").read_text()
    assert text.endswith(md)
    assert re.fullmatch(
        r"# Results: matrix_x\n\n5 runs: 3 completed, 1 pending, 1 invalid\. "
        r"Written \d{4}-\d\d-\d\d \d\d:\d\d by `make results`\.\n\n",
        text[: len(text) - len(md)],
    )


def test_csv_and_latex_hold_the_markdown_rows(summarized):
    matrix, md, _, _ = summarized
    (table,) = parse_tables(md)
    lines = list(csv.reader(io.StringIO((matrix / "summary.csv").read_text())))
    assert lines[0] == ["model"] + table.header
    assert [line[1] for line in lines[1:]] == MATRIX_ORDER
    # Numbers to 6 significant digits, unknown values empty.
    assert lines[2] == [
        "gpt2",
        "gpt2_adamw_magnitude_90",
        "adamw",
        "magnitude",
        "90",
        "vanilla",
        "150",
        "151",
        "50",
        "1000",
        "0.5",
        "4",
        "2",
        "completed",
    ]
    assert lines[4][6:] == [""] * 7 + [table.row("gpt2_adamwprune_bitter7_state_50")["status"]]
    tex = (matrix / "summary.tex").read_text()
    key, wide = latex_tables(tex)
    # Rows named by configuration, not by run id; the same cells, LaTeX-escaped.
    names = {
        "gpt2_adamw_magnitude_50": "AdamW magnitude 50.01 %",
        "gpt2_adamw_magnitude_90": "AdamW magnitude 90 %",
        "gpt2_adamw_none": "AdamW dense",
        "gpt2_adamwprune_bitter7_state_50": "AdamWPrune bitter7 state 50 %",
        "gpt2_adamwspam_none": "AdamW-SPAM dense",
    }
    assert key.env == "table" and key.width == r"\columnwidth"
    assert key.rows[0] == [
        "configuration",
        "sparsity",
        "best ppl",
        r"delta \%",
        "tokens/s",
        "peak GiB",
    ]
    assert key.rows[1:] == [
        [
            names[r["run"]].replace("%", r"\%"),
            r["sparsity"],
            r["best ppl"],
            r["delta %"],
            r["tokens/s"],
            r["peak GiB"],
        ]
        for r in table.rows
    ]
    # Every column in a table* as wide as the text; the bare status (its problems stay in
    # Markdown).
    assert wide.env == "table*" and wide.width == r"\textwidth"
    assert wide.rows[0] == ["configuration"] + [h.replace("%", r"\%") for h in COLUMNS[1:]] + [
        "status"
    ]
    assert wide.rows[1:] == [
        [
            names[r["run"]].replace("%", r"\%"),
            *(r[c].replace("_", r"\_") for c in COLUMNS[1:]),
            r["status"].split(" (")[0],
        ]
        for r in table.rows
    ]
    assert r"\usepackage{adjustbox}" in tex.splitlines()[0]


@dataclass
class TexTable:
    env: str  # table or table*
    width: str  # adjustbox's max width
    rows: list[list[str]]  # header first


def latex_tables(tex: str) -> list[TexTable]:
    """Each booktabs table of tex: its float, its width limit, its cells."""
    out = []
    for m in re.finditer(
        r"\\begin\{(table\*?)\}\[t\]\n\\centering\n\\small\n"
        r"\\begin\{adjustbox\}\{max width=(\S+)\}\n\\begin\{tabular\}\{(\w+)\}\n"
        r"\\toprule\n(.*?)\n\\bottomrule\n\\end\{tabular\}\n\\end\{adjustbox\}\n"
        r"\\caption\{.*?\}\n\\label\{.*?\}\n\\end\{\1\}",
        tex,
        re.S,
    ):
        lines = m.group(4).split("\n")
        assert lines[1] == r"\midrule"
        rows = [line.removesuffix(r" \\").split(" & ") for line in [lines[0], *lines[2:]]]
        assert all(len(r) == len(m.group(3)) for r in rows), m.group(3)
        out.append(TexTable(m.group(1), m.group(2), rows))
    assert len(out) == tex.count(r"\begin{tabular}")
    return out


def test_named_baseline_and_unknown_baseline(matrix):
    md, _, rows = summarize(matrix, baseline="gpt2_adamw_magnitude_50")
    assert {r.run_id: r.delta_pct for r in rows}["gpt2_adamw_none"] == pytest.approx(
        100 * (100 / 110 - 1)
    )
    (table,) = parse_tables(md)
    assert table.baseline == "gpt2_adamw_magnitude_50"
    # 100 * (best / 110 - 1) for best 110, 150 and 100
    assert table.column("delta %") == ["+0.0", "+36.4", "-9.1", "-", "-"]
    with pytest.raises(ValueError, match="BASELINE=nope"):
        summarize(matrix, baseline="nope")


def test_eval_json_becomes_a_column(matrix):
    (matrix / "gpt2_adamw_none" / "eval.json").write_text(
        json.dumps(
            {"format": 1, "sets": {"wikitext-2": {"kind": "perplexity", "perplexity": 42.5}}}
        )
    )
    md, _, _ = summarize(matrix)
    (table,) = parse_tables(md)
    assert table.header == COLUMNS + ["wikitext-2 ppl", "status"]
    assert table.column("wikitext-2 ppl") == ["-", "-", "42.50", "-", "-"]


def test_one_table_per_model_each_with_its_own_baseline(tmp_path):
    root = tmp_path / "runs"
    make_run(root, "gpt2_adamw_none", 100.0)
    make_run(root, "gpt2_adamw_magnitude_50", 120.0, method="magnitude")
    for name, best in [("hamt_adamw_none", 50.0), ("hamt_adamw_none_seed2", 55.0)]:
        kconf = open_tree()
        kconf.syms["MODEL_HAMT"].set_value(2)
        run = make_run(root, name, best)
        write_outputs(kconf, run / "config.txt", run / "config.py")  # a HAMT run's config
    md, _, _ = summarize(root)
    gpt2, hamt = parse_tables(md)
    assert (gpt2.model, gpt2.baseline, hamt.model, hamt.baseline) == (
        "gpt2",
        "gpt2_adamw_none",
        "hamt",
        "hamt_adamw_none",
    )
    assert gpt2.column("run") == ["gpt2_adamw_magnitude_50", "gpt2_adamw_none"]
    assert gpt2.column("delta %") == ["+20.0", "+0.0"]  # 120 / 100, not against HAMT's 50
    assert hamt.column("run") == ["hamt_adamw_none", "hamt_adamw_none_seed2"]
    assert hamt.column("variant") == ["hamt", "hamt"]
    assert hamt.column("best ppl") == ["50.00", "55.00"]
    assert hamt.column("delta %") == ["+0.0", "+10.0"]


def test_a_pipe_in_a_cell_does_not_split_it(tmp_path):
    root = tmp_path / "runs"
    make_run(root, "gpt2_adamw_none", 100.0)
    make_run(
        root, "gpt2_adamw_magnitude_50", 120.0, method="magnitude", error="disk | full\nsecond line"
    )
    (table,) = parse_tables(summarize(root)[0])
    assert table.column("status") == ["completed (disk / full)", "completed"]


def test_compare_runs_from_different_folders(tmp_path):
    a = make_run(tmp_path / "results" / "one", "gpt2_adamw_none", 80.0)
    b = make_run(tmp_path / "results" / "two", "gpt2_adamw_magnitude_50", 88.0, method="magnitude")
    md, files = compare(tmp_path / "results", [str(a), "gpt2_adamw_magnitude_50"], tmp_path / "out")
    (table,) = parse_tables(md)
    assert table.baseline == "gpt2_adamw_none"
    assert table.column("run") == ["gpt2_adamw_none", "gpt2_adamw_magnitude_50"]  # as given
    assert table.column("best ppl") == ["80.00", "88.00"]
    assert table.column("final ppl") == ["81.00", "89.00"]
    assert table.column("delta %") == ["+0.0", "+10.0"]  # 100 * (88 / 80 - 1)
    assert table.column("sparsity") == ["-", "50.0"]
    assert (tmp_path / "out" / "summary.md").read_text() == (
        f"# Comparison\n\n- gpt2_adamw_none: {a}\n- gpt2_adamw_magnitude_50: {b}\n\n" + md
    )
    with pytest.raises(FileNotFoundError, match="no run named 'ghost'"):
        compare(tmp_path / "results", ["gpt2_adamw_none", "ghost"], tmp_path / "out")
    with pytest.raises(FileNotFoundError, match="did you mean 'gpt2_adamw_none'"):
        compare(tmp_path / "results", ["gpt2_adamw_none", "gpt2_adamw_nonee"], tmp_path / "out")


def test_pretrained_baseline_folder_compares_with_runs(tmp_path):
    run = make_run(tmp_path / "results", "gpt2_adamw_none", 80.0)
    (run / "eval.json").write_text(
        json.dumps(
            {"format": 1, "sets": {"wikitext-2": {"kind": "perplexity", "perplexity": 60.0}}}
        )
    )
    base = tmp_path / "results" / "baseline-gpt2"
    base.mkdir()
    (base / "eval.json").write_text(
        json.dumps(
            {
                "format": 1,
                "model": {"family": "gpt2", "source": "pretrained", "params": 124439808},
                "sets": {"wikitext-2": {"kind": "perplexity", "perplexity": 30.0}},
            }
        )
    )
    md, _ = compare(tmp_path / "results", ["gpt2_adamw_none", "baseline-gpt2"], tmp_path / "o")
    (table,) = parse_tables(md)
    assert table.header == COLUMNS + ["wikitext-2 ppl", "status"]
    assert table.column("run") == ["gpt2_adamw_none", "baseline-gpt2"]
    # Evaluated, never trained here: no training numbers, only its eval perplexity.
    assert list(table.row("baseline-gpt2").values()) == (
        ["baseline-gpt2", "-", "none", "-", "-"] + ["-"] * len(NUMBERS) + ["30.00", "pretrained"]
    )
    assert table.row("gpt2_adamw_none")["wikitext-2 ppl"] == "60.00"


def test_monitor_summary_becomes_columns(tmp_path):
    root = tmp_path / "runs"
    make_run(
        root,
        "gpt2_adamw_none",
        80.0,
        monitor={
            "backend": "nvml",
            "gpu_util_mean": 51.4,
            "gpu_util_max": 96.0,
            "power_w_mean": 406.7,
            "power_w_max": 658.8,
            "cpu_percent_mean": 84.9,
            "rss_mb_max": 1470.0,
        },
    )
    make_run(root, "gpt2_adamw_magnitude_50", 88.0, method="magnitude")
    md, _, _ = summarize(root)
    (table,) = parse_tables(md)
    monitor = [
        "GPU util % mean",
        "GPU util % max",
        "power W mean",
        "power W max",
        "CPU % mean",
        "RSS MiB max",
    ]
    assert table.header == COLUMNS + monitor + ["status"]
    assert table.column("run") == ["gpt2_adamw_magnitude_50", "gpt2_adamw_none"]
    # Whole numbers: 51.4, 96.0, 406.7, 658.8, 84.9, 1470.0 rounded.
    assert [table.row("gpt2_adamw_none")[c] for c in monitor] == [
        "51",
        "96",
        "407",
        "659",
        "85",
        "1470",
    ]
    assert [table.row("gpt2_adamw_magnitude_50")[c] for c in monitor] == ["-"] * 6


@pytest.fixture
def script(capsys, monkeypatch):
    """`python scripts/results.py ARGS`, run in this process (tests/scriptrun.py)."""
    return lambda *args: run_script_here(capsys, monkeypatch, "scripts/results.py", *args)


def test_results_and_report_of_a_single_run_through_the_latest_link(tmp_path, script):
    """What `make && make results && make report` meets: results/latest is one run."""
    results = tmp_path / "results"
    run = make_run(
        results,
        "gpt2_adamw_none_20260101-120000",
        80.0,
        train_loss={"iters": [0, 10, 20], "values": [10.0, 6.0, 5.0]},
        lr={"iters": [0, 10, 20], "values": [1e-4, 1e-3, 1e-4]},
    )
    (results / "latest").symlink_to(run.name)
    out = script("summary", "--dir", str(results / "latest"))
    assert out.returncode == 0 and out.stderr == "", out.stderr
    (table,) = parse_tables(out.stdout)
    assert table.column("run") == [run.name] and table.column("best ppl") == ["80.00"]
    written = {
        line.removeprefix("wrote ") for line in out.stdout.splitlines() if line.startswith("wrote ")
    }
    # its curves and its record, beside it (no sparsity plot: nothing is pruned)
    assert written == {
        str(run / name)
        for name in (
            "summary.md",
            "summary.csv",
            "summary.tex",
            "train_loss.png",
            "val_loss.png",
            "lr.png",
            "memory.png",
            "throughput.png",
        )
    }
    out = script("report", "--dir", str(results / "latest"))
    assert out.returncode == 0 and out.stdout == f"wrote {run / 'index.html'}\n", out.stderr
    page = (run / "index.html").read_text()
    assert "<p>1 run: 1 completed." in page and "The only run here" in page
    assert page.count("data:image/png;base64,") == 5
    assert 'href="output.log"' not in page and 'href="metrics.json"' in page  # beside it


def test_a_folder_without_runs_says_what_to_pass(tmp_path, script):
    results = tmp_path / "results"
    make_run(results / "matrix_a", "gpt2_adamw_none", 80.0)
    (results / "empty").mkdir()
    with pytest.raises(FileNotFoundError) as err:
        summarize(results)
    assert str(err.value) == (
        f"{results} holds no runs (no config.txt, no matrix.json, no run folders); the "
        f"folders under it that do: matrix_a. Pass RESULTS=<dir>: a run folder, a matrix "
        f"folder, or a folder of run folders, e.g. RESULTS={results / 'matrix_a'}"
    )
    out = script("report", "--dir", str(results / "empty"))
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr == (
        f"error: {results / 'empty'} holds no runs (no config.txt, no "
        f"matrix.json, no run folders). Pass RESULTS=<dir>: a run folder, a "
        f"matrix folder, or a folder of run folders, e.g. "
        f"RESULTS=results/<run-id>\n"
    )


def _results_script():
    """scripts/results.py as a module, so a test can point it at its own .config."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("results_script", ROOT / "scripts/results.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_configured_baseline_is_used_unless_baseline_is_given(
    matrix, tmp_path, monkeypatch, capsys
):
    script = _results_script()
    dot_config = tmp_path / ".config"
    monkeypatch.setattr(script, "DOT_CONFIG", dot_config)

    def baseline_of_table(*args: str) -> tuple[str, list[str]]:
        """The table's baseline and the warnings about it (the fixture's damaged run
        warns too)."""
        assert script.main(["summary", "--dir", str(matrix), *args]) == 0
        out = capsys.readouterr()
        (table,) = parse_tables(out.out)
        return table.baseline, [line for line in out.err.splitlines() if "BASELINE" in line]

    # no .config: the automatic baseline, the dense AdamW run
    assert baseline_of_table() == ("gpt2_adamw_none", [])
    dot_config.write_text(
        'CONFIG_OTHER="x"\nCONFIG_RESULTS_BASELINE_RUN_ID="gpt2_adamw_magnitude_50"\n'
    )
    assert baseline_of_table() == ("gpt2_adamw_magnitude_50", [])
    # BASELINE= on the command line wins
    assert baseline_of_table("--baseline", "gpt2_adamw_magnitude_90") == (
        "gpt2_adamw_magnitude_90",
        [],
    )
    # a configured run this folder lacks: the automatic baseline, and a warning saying so
    dot_config.write_text('CONFIG_RESULTS_BASELINE_RUN_ID="gpt2_adamw_none_other_study"\n')
    shown, [warning] = baseline_of_table()
    assert shown == "gpt2_adamw_none"
    assert 'CONFIG_RESULTS_BASELINE_RUN_ID="gpt2_adamw_none_other_study" is not among' in warning
    # ... while the same name given as BASELINE= is an error, as before
    with pytest.raises(ValueError, match="BASELINE=gpt2_adamw_none_other_study: no such run"):
        script.main(["summary", "--dir", str(matrix), "--baseline", "gpt2_adamw_none_other_study"])
    # make report reads it too
    dot_config.write_text('CONFIG_RESULTS_BASELINE_RUN_ID="gpt2_adamw_magnitude_90"\n')
    assert script.main(["report", "--dir", str(matrix)]) == 0
    page = (matrix / "index.html").read_text()
    assert "<p>Baseline: gpt2_adamw_magnitude_90</p>" in page


def test_a_method_of_ones_own_shows_the_class_or_function_it_ran(tmp_path):
    from lib.results.collect import RunRow
    from lib.results.tables import columns

    own = RunRow(
        "gpt2_custom_custom_50",
        tmp_path,
        "completed",
        optimizer="custom",
        pruning="custom",
        metrics={
            "optimizer_custom": {"class": "my_lion:Lion"},
            "pruning_custom": {"function": "my_score:taylor"},
        },
    )
    builtin = RunRow("gpt2_adamw_none", tmp_path, "completed", optimizer="adamw")
    cols = {name: (f, spec) for name, f, spec in columns([own, builtin])}
    assert cols["optimizer"][0](own) == "custom (my_lion:Lion)"
    assert cols["pruning"][0](own) == "custom (my_score:taylor)"
    assert (cols["optimizer"][0](builtin), cols["pruning"][0](builtin)) == ("adamw", "none")


def test_an_unreadable_record_does_not_blank_what_the_others_share(tmp_path):
    """One corrupt metrics.json made every training field 'differing' in
    summary_seeds.json, though every readable run shared them."""
    from lib.results.summary import summarize

    root = tmp_path / "matrix_s"
    for seed in (1, 2):
        for opt in ("adamw", "adamwspam"):
            make_run(
                root,
                f"gpt2_{opt}_none_s{seed}",
                100.0 + seed,
                optimizer=opt,
                seed=seed,
                dtype="fp32",
                dataset="shakespeare",
                tokenizer="bpe",
            )
    make_run(root, "gpt2_adamw_none_s3", None, seed=3, metrics="{broken")
    make_run(
        root,
        "gpt2_adamwspam_none_s3",
        99.0,
        optimizer="adamwspam",
        seed=3,
        dtype="fp32",
        dataset="shakespeare",
        tokenizer="bpe",
    )
    summarize(root, None, None)
    record = json.loads((root / "summary_seeds.json").read_text())
    assert record["training"] == {"dataset": "shakespeare", "dtype": "fp32", "tokenizer": "bpe"}
    assert record["training_differs"] == {}
