"""`make report` on a hand-made matrix: index.html parsed back (tables, numbers,
embedded PNGs, configuration differences, links), the script, and a render in
headless Chromium where one is installed."""

from __future__ import annotations

import base64
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote

import pytest

from lib.results.report import build_report
from tests.lib.results import conftest as results_conftest
from tests.lib.results.conftest import make_run
from tests.scriptrun import run_script_here

ROOT = Path(__file__).resolve().parents[3]
PNG = b"\x89PNG\r\n\x1a\n"


# PNGs at a draft resolution (conftest.py): these tests check what is drawn, not its resolution.
pytestmark = pytest.mark.usefixtures("draft_dpi")


class Page(HTMLParser):
    """Tables (class -> list of [rows of cell texts]), hrefs, ids, image srcs, text."""

    def __init__(self, text: str):
        super().__init__()
        self.tables: dict[str, list[list[list[str]]]] = {}
        self.hrefs: list[str] = []
        self.ids: set[str] = set()
        self.images: list[str] = []
        self.text: list[str] = []
        self._cell: list[str] | None = None
        self._rows: list[list[str]] | None = None
        self.source = text
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "id" in a:
            self.ids.add(a["id"])
        if tag == "table":
            self._rows = []
            self.tables.setdefault(a.get("class", ""), []).append(self._rows)
        elif tag == "tr" and self._rows is not None:
            self._rows.append([])
        elif tag in ("td", "th"):
            self._cell = []
        elif tag == "a":
            self.hrefs.append(a["href"])
        elif tag == "img":
            self.images.append(a["src"])

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self._rows[-1].append(" ".join("".join(self._cell).split()))
            self._cell = None
        elif tag == "table":
            self._rows = None

    def handle_data(self, data):
        self.text.append(data)
        if self._cell is not None:
            self._cell.append(data)


def _section(page: Page, run_id: str) -> str:
    """The HTML under the run's heading in the configuration part."""
    return page.source.split(f'<h3 id="run-{run_id}">')[1].split("<h3")[0]


def _diff_rows(page: Page, run_id: str) -> dict[str, tuple[str, str]]:
    """The run's config-diff table as symbol -> (baseline value, run value)."""
    tables = Page(_section(page, run_id)).tables.get("config-diff", [[["header"]]])
    return {r[0]: (r[1], r[2]) for r in tables[0][1:]}


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> tuple[Path, Page]:
    """conftest's matrix with logs beside three runs, reported once for the module:
    the tests using it only read the page and the files it links."""
    matrix = results_conftest.build_matrix(tmp_path_factory.mktemp("report"))
    for name in ("gpt2_adamw_none", "gpt2_adamw_magnitude_90", "gpt2_adamwspam_none"):
        (matrix / name / "output.log").write_text("iter 10 | loss 5.0\n")
    (matrix / "gpt2_adamwspam_none" / "console.log").write_text("Traceback ...\n")
    path = build_report(matrix)[0]
    return path, Page(path.read_text())


def test_summary_table_rows_and_numbers(report):
    path, page = report
    assert path.name == "index.html" and len(page.tables["summary"]) == 1
    header, *rows = page.tables["summary"][0]
    assert (
        header[:8]
        == [
            "run",
            "optimizer",
            "pruning",
            "sparsity",
            "variant",
            "best ppl",
            "final ppl",
            "delta %",
        ]
        and header[-1] == "logs"
    )
    by = {r[0]: dict(zip(header, r)) for r in rows}
    assert list(by) == [
        "gpt2_adamw_magnitude_50",
        "gpt2_adamw_magnitude_90",
        "gpt2_adamw_none",
        "gpt2_adamwprune_bitter7_state_50",
        "gpt2_adamwspam_none",
    ]  # matrix order
    assert (
        by["gpt2_adamw_magnitude_90"]["best ppl"],
        by["gpt2_adamw_magnitude_90"]["final ppl"],
        by["gpt2_adamw_magnitude_90"]["delta %"],
    ) == ("150.00", "151.00", "+50.0")
    assert by["gpt2_adamw_magnitude_50"]["delta %"] == "+10.0"
    dense = by["gpt2_adamw_none"]
    assert (dense["tokens/s"], dense["peak GiB"], dense["wall min"]) == ("1,000", "0.50", "2.0")
    assert by["gpt2_adamwspam_none"]["status"].startswith(
        f"invalid ({path.parent / 'gpt2_adamwspam_none' / 'metrics.json'}: not readable as JSON"
    )
    assert by["gpt2_adamwprune_bitter7_state_50"]["status"].startswith("pending (no metrics.json")
    assert (
        by["gpt2_adamwprune_bitter7_state_50"]["logs"]
        == "no output.log no console.log no metrics.json"
    )
    assert "Baseline: gpt2_adamw_none" in "".join(page.text)


def test_plots_are_embedded_pngs(report):
    _, page = report
    assert len(page.images) == 4  # val loss, ppl vs sparsity, memory, throughput
    for src in page.images:
        assert src.startswith("data:image/png;base64,")
        data = base64.b64decode(src.split(",", 1)[1], validate=True)
        assert data.startswith(PNG) and len(data) > 5000


def test_config_differences_against_the_baseline(report):
    _, page = report
    assert "The baseline run." in _section(page, "gpt2_adamw_none")
    spam = _diff_rows(page, "gpt2_adamwspam_none")
    assert spam["OPTIMIZER"] == ("adamw", "adamwspam")
    assert spam["SPAM_THETA"] == ("(not set)", "5000.0")
    assert spam["SPAM_CLIP_SKIP_STEPS"] == ("(not set)", "20")
    assert not {"ADAM_BETA1", "ADAM_BETA2", "ADAM_EPSILON", "WEIGHT_DECAY"} & set(spam)  # shared
    # choice members and hidden helpers are left to the choice's own row
    assert not {"OPTIMIZER_ADAMW", "OPTIMIZER_ADAMWSPAM", "OPTIM_USES_SPAM"} & set(spam)
    magnitude = _diff_rows(page, "gpt2_adamw_magnitude_90")
    assert magnitude["PRUNING_MODE"] == ("none", "single")
    assert magnitude["PRUNING_METHOD"] == ("(not set)", "magnitude")
    assert magnitude["PRUNING_TARGET_SPARSITY"] == ("(not set)", "0.9")
    assert "OPTIMIZER" not in magnitude
    prune = _diff_rows(page, "gpt2_adamwprune_bitter7_state_50")
    assert prune["ADAMWPRUNE_VARIANT"] == ("(not set)", "bitter7")


def test_links_point_to_existing_files_and_anchors(report):
    path, page = report
    files = [h for h in page.hrefs if not h.startswith("#")]
    anchors = [h[1:] for h in page.hrefs if h.startswith("#")]
    assert len(anchors) == 5 and set(anchors) <= page.ids
    # output.log x3, console.log x1, metrics.json x4 (the malformed one is still a file)
    assert (
        sorted(Path(h).name for h in files)
        == ["console.log"] + ["metrics.json"] * 4 + ["output.log"] * 3
    )
    for h in files:
        assert not Path(h).is_absolute() and (path.parent / unquote(h)).is_file()


def test_unreadable_config_and_named_baseline(matrix):
    make_run(matrix, "gpt2_zz_plain", 90.0)  # not in matrix.json: not in the report
    (matrix / "gpt2_adamw_magnitude_50" / "config.txt").write_text("CONFIG_BATCH_SIZE=99999\n")
    page = Page(build_report(matrix, baseline="gpt2_adamw_magnitude_90")[0].read_text())
    assert "gpt2_zz_plain" not in page.source
    assert "config.txt unreadable" in _section(page, "gpt2_adamw_magnitude_50")
    none = _diff_rows(page, "gpt2_adamw_none")
    assert none["PRUNING_TARGET_SPARSITY"] == ("0.9", "(not set)")
    # magnitude_50 is its own "unknown" model table now; gpt2_adamw_none is in the gpt2 one
    assert len(page.tables["summary"]) == 2
    header, *rows = page.tables["summary"][1]
    assert {r[0]: r[header.index("delta %")] for r in rows}["gpt2_adamw_none"] == "-33.3"


def test_report_script_writes_index_and_refuses_a_missing_folder(
    matrix, tmp_path, capsys, monkeypatch
):
    """scripts/results.py as `python` runs it, in this process (tests/scriptrun.py)."""
    ok = run_script_here(capsys, monkeypatch, "scripts/results.py", "report", "--dir", str(matrix))
    assert ok.returncode == 0, ok.stderr
    assert f"wrote {matrix / 'index.html'}" in ok.stdout and (matrix / "index.html").is_file()
    bad = run_script_here(
        capsys, monkeypatch, "scripts/results.py", "report", "--dir", str(tmp_path / "nowhere")
    )
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert bad.stderr == (
        f"error: {tmp_path / 'nowhere'} is not a folder: train a run with "
        f"`make` (or a matrix with `make test-matrix`) first, or pass "
        f"RESULTS=<dir>: a run folder, a matrix folder, or a folder of run "
        f"folders\n"
    )


ENV = {
    "python": "3.11.9",
    "torch": {"version": "2.5.1+cu124", "cuda": "12.4"},
    "gpu": "NVIDIA H100 80GB HBM3",
}


def test_environment_shown_once_when_identical(tmp_path):
    root = tmp_path / "runs"
    make_run(root, "a", 100.0, environment=ENV)
    make_run(root, "b", 101.0, environment=ENV)
    page = Page(build_report(root)[0].read_text())
    assert page.tables["environment"] == [
        [
            ["setting", "value"],
            ["python", "3.11.9"],
            ["torch.version", "2.5.1+cu124"],
            ["torch.cuda", "12.4"],
            ["gpu", "NVIDIA H100 80GB HBM3"],
        ]
    ]
    assert "The same for all 2 runs." in "".join(page.text)


def test_environment_names_the_runs_of_each_differing_value(tmp_path):
    root = tmp_path / "runs"
    make_run(root, "a", 100.0, environment=ENV)
    make_run(root, "b", 101.0, environment=ENV)
    make_run(root, "c", 102.0, environment={**ENV, "gpu": "NVIDIA A100-SXM4-80GB"})
    make_run(root, "d", 103.0)  # written before runs recorded their environment
    source = build_report(root)[0].read_text()
    page = Page(source)
    (table,) = page.tables["environment"]
    assert [r[0] for r in table] == ["setting", "python", "torch.version", "torch.cuda", "gpu"]
    assert table[1][1] == "3.11.9"  # every run that recorded one agrees
    assert "<td>NVIDIA H100 80GB HBM3 (a, b)<br>NVIDIA A100-SXM4-80GB (c)</td>" in source
    assert "No environment recorded (runs from before it was recorded): d" in source
    for name in "ab":
        make_run(tmp_path / "old", name, 100.0)
    assert "environment" not in Page(build_report(tmp_path / "old")[0].read_text()).tables


def test_measurement_columns_go_to_tables_of_their_own(tmp_path):
    root = tmp_path / "runs"
    monitor = {
        "gpu_util_mean": 51.4,
        "gpu_util_max": 96.0,
        "power_w_mean": 406.7,
        "power_w_max": 658.8,
        "cpu_percent_mean": 84.9,
        "rss_mb_max": 1470.0,
    }
    inference = {
        "lengths": [
            {
                "prompt_tokens": n,
                "prefill_ms": 1.5,
                "decode_tokens_per_sec": 900.0,
                "cache_bytes": 4096,
            }
            for n in (128, 512)
        ]
    }
    make_run(root, "gpt2_adamw_none", 100.0, monitor=monitor, inference=inference)
    page = Page(build_report(root)[0].read_text())
    (summary,) = page.tables["summary"]
    assert summary[0] == [
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
        "status",
        "logs",
    ]
    first, second = page.tables["measurements"]
    # 6 monitor columns and 3 per prompt length: 12, ten to a table, each led by the run
    assert first[0][0] == second[0][0] == "run" and len(first[0]) == 11 and len(second[0]) == 3
    assert first[0][1:7] == [
        "GPU util % mean",
        "GPU util % max",
        "power W mean",
        "power W max",
        "CPU % mean",
        "RSS MiB max",
    ]
    assert first[1][1:8] == ["51", "96", "407", "659", "85", "1470", "1.50"]
    assert second[0][1:] == ["decode tok/s @512", "cache KiB @512"]
    assert second[1] == ["gpt2_adamw_none", "900", "4"]
