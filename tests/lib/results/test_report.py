"""`make report` on a hand-made matrix: index.html parsed back (tables, numbers,
embedded PNGs, configuration differences, links), the script, and a render in
headless Chromium where one is installed."""
from __future__ import annotations

import base64
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote

import pytest

from lib.results.report import build_report
from tests.lib.results.conftest import make_run

ROOT = Path(__file__).resolve().parents[3]
PNG = b"\x89PNG\r\n\x1a\n"


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


@pytest.fixture
def report(matrix) -> tuple[Path, Page]:
    for name in ("gpt2_adamw_none", "gpt2_adamw_magnitude_90", "gpt2_adamwspam_none"):
        (matrix / name / "output.log").write_text("iter 10 | loss 5.0\n")
    (matrix / "gpt2_adamwspam_none" / "console.log").write_text("Traceback ...\n")
    path = build_report(matrix)[0]
    return path, Page(path.read_text())


def test_summary_table_rows_and_numbers(report):
    path, page = report
    assert path.name == "index.html" and len(page.tables["summary"]) == 1
    header, *rows = page.tables["summary"][0]
    assert header[:8] == ["run", "optimizer", "pruning", "sparsity", "variant", "best ppl",
                          "final ppl", "delta %"] and header[-1] == "logs"
    by = {r[0]: dict(zip(header, r)) for r in rows}
    assert list(by) == ["gpt2_adamw_magnitude_50", "gpt2_adamw_magnitude_90", "gpt2_adamw_none",
                        "gpt2_adamwprune_bitter7_state_50", "gpt2_adamwspam_none"]  # matrix order
    assert (by["gpt2_adamw_magnitude_90"]["best ppl"], by["gpt2_adamw_magnitude_90"]["final ppl"],
            by["gpt2_adamw_magnitude_90"]["delta %"]) == ("150.00", "151.00", "+50.0")
    assert by["gpt2_adamw_magnitude_50"]["delta %"] == "+10.0"
    dense = by["gpt2_adamw_none"]
    assert (dense["tokens/s"], dense["peak GiB"], dense["wall min"]) == ("1,000", "0.50", "2.0")
    assert by["gpt2_adamwspam_none"]["status"].startswith("failed (metrics.json malformed")
    assert by["gpt2_adamwprune_bitter7_state_50"]["status"].startswith("pending (no metrics.json")
    assert by["gpt2_adamwprune_bitter7_state_50"]["logs"] == \
        "no output.log no console.log no metrics.json"
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
    assert sorted(Path(h).name for h in files) == ["console.log"] + ["metrics.json"] * 4 + \
        ["output.log"] * 3
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


def test_report_script_writes_index_and_refuses_a_missing_folder(matrix, tmp_path):
    ok = subprocess.run([sys.executable, "scripts/results.py", "report", "--dir", str(matrix)],
                        cwd=ROOT, capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    assert f"wrote {matrix / 'index.html'}" in ok.stdout and (matrix / "index.html").is_file()
    bad = subprocess.run([sys.executable, "scripts/results.py", "report", "--dir",
                          str(tmp_path / "nowhere")], cwd=ROOT, capture_output=True, text=True)
    assert bad.returncode == 2 and "does not exist" in bad.stderr
