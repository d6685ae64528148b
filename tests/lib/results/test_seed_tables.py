"""`make results` over runs that differ only by seed: the seed table in
summary.md (parsed back, cell by cell), summary_seeds.csv, summary.tex,
index.html and the plots, against numbers worked out by hand here.

The fixture matrix has four configurations of gpt2 (seeds in brackets):
  gpt2_adamw_none          baseline, [1 2 3]: best ppl 100, 104, 98
  gpt2_adamw_magnitude_50  [1 2 3]: 110, 114.1, 107.9 (paired differences 10, 10.1, 9.9)
  gpt2_adamw_magnitude_90  [1 2 4] completed: 150, 160, 155; [3] still running (best 500 so far)
  gpt2_adamwspam_none      [1 2] completed: 99, 102.5; [3] failed (best 50 before it failed)
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
from matplotlib.axes import Axes

from lib.jobs.state import MatrixState
from lib.results import curves, plots, seed_record, seeds
from lib.results.collect import RunRow, read_run
from lib.results.report import build_report
from lib.results.summary import summarize
from tests.lib.results.conftest import make_run
from tests.lib.results.test_report import Page

T_975 = {1: 12.706204736174707, 2: 4.302652729749464}  # Student's t table, by degrees of freedom
BASE = {1: 100.0, 2: 104.0, 3: 98.0}
PRUNED = {1: 110.0, 2: 114.1, 3: 107.9}
UNEQUAL = {1: 150.0, 2: 160.0, 4: 155.0}
FAILED = {1: 99.0, 2: 102.5}
TOKENS = {1: 1000.0, 2: 1100.0, 3: 900.0}  # the baseline's; other runs 1000
PEAK_MB = {1: 1024.0, 2: 1536.0, 3: 2048.0}  # the baseline's; other runs 512
WIKITEXT = {
    "gpt2_adamw_none": {1: 60.0, 2: 62.0, 3: 64.0},
    "gpt2_adamw_magnitude_50": {1: 70.0, 2: 72.0},
}  # its seed 3 has no eval.json
HEADER = [
    "configuration",
    "seeds",
    "n",
    "best val loss",
    "best ppl",
    "final ppl",
    "tokens/s",
    "peak GiB",
    "wikitext-2 ppl",
    "paired Δ best ppl",
]


# Draft PNGs (conftest.py): these tests check what is drawn, not its resolution or margins.
pytestmark = pytest.mark.usefixtures("draft_figures")


def mean(xs: list[float]) -> float:
    return sum(xs) / len(xs)


def sd(xs: list[float]) -> float:
    """Sample standard deviation, divided by n - 1."""
    m = mean(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1))


def p_from_t(t: float, dof: int) -> float:
    """Two-sided p of Student's t, in closed form for 1 and 2 degrees of freedom:
    1 dof is the Cauchy distribution, P(|T| > t) = 1 - 2 atan(t) / pi; with
    2 dof, P(|T| > t) = 1 - t / sqrt(t^2 + 2)."""
    t = abs(t)
    return 1 - 2 * math.atan(t) / math.pi if dof == 1 else 1 - t / math.sqrt(t * t + 2)


def paired_by_hand(base: dict[int, float], other: dict[int, float]) -> tuple[float, float, float]:
    """(mean difference, half-width of its 95 % interval, t-test p) over shared seeds."""
    diffs = [other[s] - base[s] for s in sorted(base.keys() & other.keys())]
    n = len(diffs)
    m, s = mean(diffs), sd(diffs)
    return m, T_975[n - 1] * s / math.sqrt(n), p_from_t(m / (s / math.sqrt(n)), n - 1)


def spread_cell(xs: list[float], spec: str = "") -> str:
    """Mean ± sd to the place of sd's second significant digit (none rounds up here)."""
    places = max(1 - math.floor(math.log10(sd(xs))), 0)
    comma = "," if "," in spec else ""
    return f"{mean(xs):{comma}.{places}f} ± {sd(xs):{comma}.{places}f}"


def interval_cell(diff: float, half: float) -> str:
    """The paired difference and its interval to half's second significant digit."""
    places = 1 - math.floor(math.log10(half))
    low, mid, high = (
        f"{round(x, places):+.{max(places, 0)}f}" for x in (diff - half, diff, diff + half)
    )
    return f"{mid} [{low}, {high}]"


def write_eval(run: Path, ppl: float) -> None:
    (run / "eval.json").write_text(
        json.dumps({"format": 1, "sets": {"wikitext-2": {"kind": "perplexity", "perplexity": ppl}}})
    )


def build_matrix(root: Path) -> Path:
    states = {}
    for s, best in BASE.items():
        run = make_run(
            root,
            f"gpt2_adamw_none_s{s}",
            best,
            seed=s,
            tokens_per_sec=TOKENS[s],
            peak_memory_mb=PEAK_MB[s],
            dtype="bf16",
            max_iters=20,
        )
        write_eval(run, WIKITEXT["gpt2_adamw_none"][s])
    for s, best in PRUNED.items():
        run = make_run(
            root, f"gpt2_adamw_magnitude_50_s{s}", best, seed=s, method="magnitude", dtype="bf16"
        )
        if s in WIKITEXT["gpt2_adamw_magnitude_50"]:
            write_eval(run, WIKITEXT["gpt2_adamw_magnitude_50"][s])
    for s, best in UNEQUAL.items():
        make_run(
            root,
            f"gpt2_adamw_magnitude_90_s{s}",
            best,
            seed=s,
            method="magnitude",
            sparsity="0.9",
            dtype="bf16",
        )
    make_run(
        root,
        "gpt2_adamw_magnitude_90_s3",
        None,
        seed=3,
        method="magnitude",
        sparsity="0.9",
        metrics=json.dumps({"status": "running", "best_val_perplexity": 500.0, "dtype": "bf16"}),
    )
    states["gpt2_adamw_magnitude_90_s3"] = "running"
    make_run(
        root,
        "gpt2_adamwspam_none_s1",
        FAILED[1],
        seed=1,
        optimizer="adamwspam",
        val_loss={"iters": [10, 20, 30], "values": [5.5, 4.6, 4.5]},
        dtype="bf16",
    )
    make_run(root, "gpt2_adamwspam_none_s2", FAILED[2], seed=2, optimizer="adamwspam", dtype="bf16")
    make_run(
        root,
        "gpt2_adamwspam_none_s3",
        None,
        seed=3,
        optimizer="adamwspam",
        metrics=json.dumps(
            {
                "status": "failed",
                "error": "CUDA out of memory",
                "dtype": "bf16",
                "best_val_perplexity": 50.0,
                "val_loss": {"iters": [10], "values": [9.0]},
            }
        ),
    )
    states["gpt2_adamwspam_none_s3"] = "failed"
    names = sorted(p.name for p in root.iterdir())
    MatrixState.create(root, "matrix_seeds", {n: [] for n in names}, {}, 0)
    state = MatrixState.load(root)
    for name in names:
        state.update(name, state=states.get(name, "completed"))
    return root


@dataclass
class Summarized:
    root: Path
    md: str
    files: list[Path]
    rows: list[RunRow]


@pytest.fixture(scope="module")
def seeded(tmp_path_factory) -> Summarized:
    root = build_matrix(tmp_path_factory.mktemp("seeds") / "matrix_seeds")
    return Summarized(root, *summarize(root))


def parse_seed_tables(md: str) -> dict[str, tuple[str, list[str], list[dict[str, str]]]]:
    """model -> (baseline configuration, header, rows) of the "## Seed statistics" part."""
    part = md.split("## Seed statistics\n")[1].split("\n## Runs\n")[0]
    out = {}
    for m in re.finditer(
        r"^\*\*(.+?)\*\*: baseline configuration (.+?)\.\n\n((?:\|.*\n)+)", part, flags=re.M
    ):
        lines = m.group(3).splitlines()
        header = [c.strip() for c in lines[0][1:-1].split("|")]
        assert lines[1] == "|" + "|".join(["---"] * len(header)) + "|"
        rows = [dict(zip(header, (c.strip() for c in line[1:-1].split("|")))) for line in lines[2:]]
        out[m.group(1)] = (m.group(2), header, rows)
    return out


def by_config(rows: list[dict[str, str]]) -> dict[str, dict[str, str]]:
    return {r["configuration"]: r for r in rows}


def test_seed_table_cells_match_hand_computed_statistics(seeded):
    ((model, (baseline, header, rows)),) = parse_seed_tables(seeded.md).items()
    assert (model, baseline, header) == ("gpt2", "gpt2_adamw_none", HEADER)
    assert [r["configuration"] for r in rows] == [  # first seen, in matrix.json's order
        "gpt2_adamw_magnitude_50",
        "gpt2_adamw_magnitude_90",
        "gpt2_adamw_none",
        "gpt2_adamwspam_none",
    ]
    t = by_config(rows)
    base = t["gpt2_adamw_none"]
    # best ppl: mean 302 / 3 = 100.667; deviations -0.667, 3.333, -2.667, squares sum 18.667,
    # sd = sqrt(18.667 / 2) = 3.055: two significant digits, 3.1, so the mean to tenths too
    assert base["best ppl"] == spread_cell(list(BASE.values())) == "100.7 ± 3.1"
    assert base["final ppl"] == "101.7 ± 3.1"  # the fixture's final is best + 1
    assert base["best val loss"] == spread_cell([math.log(x) for x in BASE.values()])
    assert base["best val loss"] == "4.612 ± 0.030"
    assert base["tokens/s"] == "1,000 ± 100"  # 1000, 1100, 900
    assert base["peak GiB"] == "1.50 ± 0.50"  # 1, 1.5, 2 GiB
    assert base["wikitext-2 ppl"] == "62.0 ± 2.0"  # 60, 62, 64
    assert (base["seeds"], base["n"], base["paired Δ best ppl"]) == ("1 2 3", "3", "baseline")

    pruned = t["gpt2_adamw_magnitude_50"]
    assert pruned["best ppl"] == spread_cell(list(PRUNED.values())) == "110.7 ± 3.2"  # sd 3.153
    # Two of its three finished seeds have an eval.json: (70 + 72) / 2, sd sqrt(2)
    assert pruned["wikitext-2 ppl"] == "71.0 ± 1.4 (n=2)"
    # differences 10, 10.1, 9.9: mean 10, sd 0.1, half-width 4.3027 * 0.1 / sqrt(3) = 0.2484;
    # t = 10 / (0.1 / sqrt(3)) = 173.2, p = 1 - t / sqrt(t^2 + 2) = 3.3e-5
    diff, half, p = paired_by_hand(BASE, PRUNED)
    assert (diff, half) == (pytest.approx(10.0), pytest.approx(0.248414, abs=1e-6))
    assert p == pytest.approx(3.3332e-5, rel=1e-3)
    assert pruned["paired Δ best ppl"] == f"{interval_cell(diff, half)} (n=3, p<0.001) *"
    assert pruned["paired Δ best ppl"] == "+10.00 [+9.75, +10.25] (n=3, p<0.001) *"


def test_unequal_and_unfinished_seeds_pair_only_shared_finished_seeds(seeded):
    t = by_config(parse_seed_tables(seeded.md)["gpt2"][2])
    unequal = t["gpt2_adamw_magnitude_90"]
    # seeds 1, 2, 4 finished (150, 160, 155: mean 155, sd 5); seed 3's 500 is not averaged
    assert (unequal["seeds"], unequal["n"]) == ("1 2 3 4", "3, 1 unfinished")
    assert unequal["best ppl"] == spread_cell(list(UNEQUAL.values())) == "155.0 ± 5.0"
    # shared finished seeds with the baseline: 1 and 2; differences 50, 56: mean 53,
    # sd sqrt(18) = 4.243, half-width 12.706 * 4.243 / sqrt(2) = 38.12;
    # t = 53 / 3 = 17.67 with 1 dof: p = 1 - 2 atan(17.67) / pi = 0.036
    diff, half, p = paired_by_hand(BASE, {1: 150.0, 2: 160.0})
    assert (diff, half) == (pytest.approx(53.0), pytest.approx(38.1186, abs=1e-4))
    assert f"{p:.2g}" == "0.036"
    assert unequal["paired Δ best ppl"] == f"{interval_cell(diff, half)} (n=2, p={p:.2g}) *"
    assert unequal["paired Δ best ppl"] == "+53 [+15, +91] (n=2, p=0.036) *"  # half-width 38

    failed = t["gpt2_adamwspam_none"]
    # seed 3 failed (its best 50 before failing is not averaged): 99, 102.5
    assert (failed["seeds"], failed["n"]) == ("1 2 3", "2, 1 failed")
    assert failed["best ppl"] == spread_cell(list(FAILED.values())) == "100.8 ± 2.5"
    # differences -1, -1.5: mean -1.25, sd 0.3536, half-width 12.706 * 0.25 = 3.177;
    # t = -1.25 / 0.25 = -5: p = 1 - 2 atan(5) / pi = 0.126; the interval holds zero: no *
    diff, half, p = paired_by_hand(BASE, FAILED)
    assert p == pytest.approx(0.125666, abs=1e-6)
    assert failed["paired Δ best ppl"] == f"{interval_cell(diff, half)} (n=2, p={p:.2g})"
    assert failed["paired Δ best ppl"] == "-1.2 [-4.4, +1.9] (n=2, p=0.13)"  # half-width 3.2
    assert failed["wikitext-2 ppl"] == "-"


def test_per_run_table_follows_with_each_runs_seed(seeded):
    runs = seeded.md.split("\n## Runs\n")[1]
    header = next(line for line in runs.splitlines() if line.startswith("| run "))
    assert header.startswith("| run | seed | optimizer |")
    assert "| gpt2_adamw_magnitude_90_s4 | 4 | adamw |" in runs
    assert {f.name for f in seeded.files} >= {"summary.md", "summary_seeds.csv", "summary.tex"}
    assert (seeded.root / "summary.md").read_text().endswith(seeded.md)


CSV_FIGURES = [
    "best_val_loss",
    "best_ppl",
    "final_ppl",
    "tokens_per_sec",
    "peak_gib",
    "wikitext-2_ppl",
]


def test_seed_csv_has_mean_sd_interval_and_n_of_each_figure(seeded):
    lines = list(csv.DictReader(io.StringIO((seeded.root / "summary_seeds.csv").read_text())))
    head = list(lines[0])
    assert head == (
        ["model", "configuration", "baseline", "seeds", "n", "failed", "unfinished"]
        + [f"{f}_{x}" for f in CSV_FIGURES for x in ("mean", "sd", "ci_low", "ci_high", "n")]
        + [
            f"delta_best_ppl_{x}"
            for x in ("mean", "ci_low", "ci_high", "n", "p_t", "p_wilcoxon", "excludes_zero")
        ]
    )
    rows = {r["configuration"]: r for r in lines}
    pruned = rows["gpt2_adamw_magnitude_50"]
    xs = list(PRUNED.values())
    half = T_975[2] * sd(xs) / math.sqrt(3)
    assert [float(pruned[f"best_ppl_{x}"]) for x in ("mean", "sd", "ci_low", "ci_high")] == [
        pytest.approx(v, rel=1e-5) for v in (mean(xs), sd(xs), mean(xs) - half, mean(xs) + half)
    ]
    assert pruned["best_ppl_n"] == "3" and pruned["wikitext-2_ppl_n"] == "2"
    diff, dhalf, p = paired_by_hand(BASE, PRUNED)
    assert [float(pruned[f"delta_best_ppl_{x}"]) for x in ("mean", "ci_low", "ci_high", "p_t")] == [
        pytest.approx(v, rel=1e-5) for v in (diff, diff - dhalf, diff + dhalf, p)
    ]
    assert (
        pruned["delta_best_ppl_n"],
        pruned["delta_best_ppl_p_wilcoxon"],
        pruned["delta_best_ppl_excludes_zero"],
    ) == ("3", "", "y")
    failed = rows["gpt2_adamwspam_none"]
    assert (failed["n"], failed["failed"], failed["unfinished"], failed["seeds"]) == (
        "2",
        "1",
        "0",
        "1 2 3",
    )
    assert failed["delta_best_ppl_excludes_zero"] == "n"
    assert rows["gpt2_adamw_magnitude_90"]["unfinished"] == "1"
    base = rows["gpt2_adamw_none"]
    assert base["baseline"] == "gpt2_adamw_none" and base["delta_best_ppl_mean"] == ""
    assert float(base["tokens_per_sec_sd"]) == pytest.approx(100.0)


def test_latex_seed_table_is_booktabs_with_escaped_cells(seeded):
    tex = (seeded.root / "summary.tex").read_text().splitlines()
    # The seed table comes first; its rows are the Markdown cells, escaped.
    start = tex.index(r"\toprule")
    assert tex[start - 1] == r"\begin{tabular}{ll" + "r" * (len(HEADER) - 2) + "}"
    assert tex[start + 1] == " & ".join(HEADER[:-1]) + r" & paired $\Delta$ best ppl \\"
    assert tex[start + 2] == r"\midrule"
    body = tex[start + 3 : tex.index(r"\bottomrule")]
    md_rows = parse_seed_tables(seeded.md)["gpt2"][2]

    def escaped(cell: str) -> str:
        return cell.replace("_", r"\_").replace("±", r"$\pm$").replace("<", "$<$")

    # Rows named by configuration (lib/results/labels.py), not by run id.
    names = {
        "gpt2_adamw_magnitude_50": r"AdamW magnitude 50 \%",
        "gpt2_adamw_magnitude_90": r"AdamW magnitude 90 \%",
        "gpt2_adamw_none": "AdamW dense",
        "gpt2_adamwspam_none": "AdamW-SPAM dense",
    }
    assert body == [
        " & ".join([names[r["configuration"]]] + [escaped(r[h]) for h in HEADER[1:]]) + r" \\"
        for r in md_rows
    ]
    assert body[0] == (
        r"AdamW magnitude 50 \% & 1 2 3 & 3 & 4.706 $\pm$ 0.028 & "
        r"110.7 $\pm$ 3.2 & 111.7 $\pm$ 3.2 & 1,000 $\pm$ 0 & 0.50 $\pm$ 0.00 & "
        r"71.0 $\pm$ 1.4 (n=2) & +10.00 [+9.75, +10.25] (n=3, p$<$0.001) * \\"
    )
    # A table* as wide as the text, shrunk to it when wider; the per-run tables follow.
    assert tex[start - 2 : start] == [r"\begin{adjustbox}{max width=\textwidth}", tex[start - 1]]
    assert tex[start - 5] == r"\begin{table*}[t]"
    assert tex.count(r"\toprule") == 3 and tex.count(r"\end{table*}") == 2
    assert tex.count(r"\end{table}") == 1


def test_report_shows_the_same_seed_table(seeded, tmp_path):
    root = tmp_path / "m"
    shutil.copytree(seeded.root, root)
    page = Page(build_report(root)[0].read_text())
    (table,) = page.tables["seeds"]
    md_rows = parse_seed_tables(seeded.md)["gpt2"][2]
    assert table[0] == HEADER
    assert table[1:] == [[r[h] for h in HEADER] for r in md_rows]
    assert len(page.tables["summary"][0]) == 1 + len(seeded.rows)  # the per-run table stays


def test_one_seed_everywhere_says_so_instead_of_statistics(matrix):
    md, files, _ = summarize(matrix)
    assert md.startswith(seeds.ONE_SEED + "\n\n### gpt2\n")
    assert seeds.ONE_SEED == (
        "Each configuration has one seed, so no spread, interval or test "
        "is given: MATRIX_SEEDS=3 trains every configuration with three "
        "seeds."
    )
    assert "±" not in md and "Seed statistics" not in md and "| seed |" not in md
    assert "summary_seeds.csv" not in {f.name for f in files}
    page = Page(build_report(matrix)[0].read_text())
    assert "seeds" not in page.tables and seeds.ONE_SEED in "".join(page.text)


def test_one_seed_configuration_beside_seeded_ones(tmp_path):
    root = tmp_path / "runs"
    for s, best in BASE.items():
        make_run(root, f"gpt2_adamw_none_s{s}", best, seed=s)
    make_run(root, "gpt2_adamw_magnitude_50", 106.5, seed=2, method="magnitude")  # no suffix
    t = by_config(parse_seed_tables(summarize(root)[0])["gpt2"][2])
    one = t["gpt2_adamw_magnitude_50"]
    assert (one["seeds"], one["n"], one["best ppl"]) == ("2", "1", "106.50 (1 seed)")
    assert one["paired Δ best ppl"] == "+2.50 (1 shared seed)"  # 106.5 - 104 at seed 2


def test_named_baseline_may_be_a_configuration(seeded, tmp_path):
    root = tmp_path / "m"
    shutil.copytree(seeded.root, root)
    md, _, rows = summarize(root, baseline="gpt2_adamwspam_none")
    baseline, _, table = parse_seed_tables(md)["gpt2"]
    assert baseline == "gpt2_adamwspam_none"
    t = by_config(table)
    assert t["gpt2_adamwspam_none"]["paired Δ best ppl"] == "baseline"
    # against the baseline seen from the other side: differences +1, +1.5
    assert t["gpt2_adamw_none"]["paired Δ best ppl"] == "+1.2 [-1.9, +4.4] (n=2, p=0.13)"
    assert "Baseline: gpt2_adamwspam_none_s1;" in md  # the per-run table: its first seed


def test_config_key_drops_only_the_runs_own_seed(tmp_path):
    assert RunRow("x_s5", tmp_path, "completed", seed=5).config_key == "x"
    assert RunRow("x_s5", tmp_path, "completed", seed=1337).config_key == "x_s5"
    assert RunRow("x_s5", tmp_path, "completed").config_key == "x_s5"
    assert RunRow("lr_s1e3_s2", tmp_path, "completed", seed=2).config_key == "lr_s1e3"
    root = tmp_path / "runs"
    run = make_run(root, "gpt2_adamw_none_s7", 100.0, seed=7)
    assert (read_run(run).seed, read_run(run).config_key) == (7, "gpt2_adamw_none")
    lost = root / "gpt2_adamw_none_s8"
    lost.mkdir()
    (lost / "config.txt").write_text("CONFIG_NO_SUCH_SYMBOL=y\n")
    row = read_run(lost)
    assert row.model is None and (row.seed, row.config_key) == (8, "gpt2_adamw_none")
    (c,) = seeds.configurations([read_run(run), row])
    assert (c.key, c.model, c.seeds, len(c.done)) == ("gpt2_adamw_none", "gpt2", [7, 8], 1)


def test_a_repeated_seed_stays_its_own_configuration(tmp_path):
    root = tmp_path / "runs"
    make_run(root, "gpt2_adamw_none", 100.0)  # TRAIN_SEED's default, 1337
    make_run(root, "gpt2_adamw_none_s1337", 101.0, seed=1337)
    rows = [read_run(p) for p in sorted(root.iterdir())]
    assert [(c.key, c.seeds) for c in seeds.configurations(rows)] == [
        ("gpt2_adamw_none", [1337]),
        ("gpt2_adamw_none_s1337", [1337]),
    ]
    assert summarize(root)[0].startswith(seeds.ONE_SEED)


def test_plots_draw_a_seed_band_and_error_bars(seeded, tmp_path, monkeypatch):
    bands, bars = [], []
    fill, errorbar = Axes.fill_between, Axes.errorbar

    def spy_fill(self, x, low, high, **kw):
        bands.append((list(x), list(low), list(high)))
        return fill(self, x, low, high, **kw)

    def spy_errorbar(self, x, y, yerr=None, **kw):
        if yerr is not None:  # not the bar charts' horizontal error bars
            bars.append((list(x), list(y), list(yerr)))
        return errorbar(self, x, y, yerr=yerr, **kw)

    monkeypatch.setattr(Axes, "fill_between", spy_fill)
    monkeypatch.setattr(Axes, "errorbar", spy_errorbar)
    (base,) = [r for r in seeded.rows if r.run_id == "gpt2_adamw_none_s1"]
    written = plots.write_all(seeded.rows, {"gpt2": base}, tmp_path)
    assert sorted(p.name for p in written) == [
        "memory.png",
        "ppl_vs_sparsity.png",
        "throughput.png",
        "val_loss.png",
    ]
    assert all(p.stat().st_size > 1000 for p in written)
    # One min-max band per configuration, in order, around its mean line; each seed's curve
    # is (ln best + 1, ln best) at iterations 10, 20. adamwspam's seed 1 is (5.5, 4.6, 4.5)
    # at 10, 20, 30: iteration 30, which seed 2 lacks, is left out, and so is the failed
    # seed 3 (9.0 at 10).
    logs = [[math.log(x) for x in values.values()] for values in (PRUNED, UNEQUAL, BASE)]
    expected = [([10, 20], [min(v) + 1, min(v)], [max(v) + 1, max(v)]) for v in logs]
    expected.append(([10, 20], [5.5, 4.6], [math.log(102.5) + 1, math.log(102.5)]))
    assert len(bands) == 4
    for got, want in zip(bands, expected):
        assert got[0] == want[0]
        assert list(got[1:]) == [pytest.approx(w, rel=1e-12) for w in want[1:]]
    means = [curves._seed_band(c)[1] for c in seeds.configurations(seeded.rows)]
    assert means[:3] == [pytest.approx([mean(v) + 1, mean(v)], rel=1e-12) for v in logs]
    assert means[3] == pytest.approx(
        [(5.5 + math.log(102.5) + 1) / 2, (4.6 + math.log(102.5)) / 2], rel=1e-12
    )
    # One magnitude method: points at 50 % and 90 %, mean best ppl, sd error bars
    assert bars == [
        (
            [pytest.approx(50.0), pytest.approx(90.0)],
            [pytest.approx(mean(list(PRUNED.values()))), 155.0],
            [pytest.approx(sd(list(PRUNED.values()))), 5.0],
        )
    ]


def test_seed_record_holds_every_seed_and_gives_the_same_tables(seeded):
    """summary_seeds.json keeps each seed's figures; the tables computed again
    from it (what docs/benchmarks.md shows of a record) are summary.md's."""
    record = json.loads((seeded.root / "summary_seeds.json").read_text())
    assert record["kind"] == "seeds" and record["runs"] == len(seeded.rows)
    # how the runs trained: what they all share, and what differs with each value's runs
    assert record["training"] == {"dtype": "bf16"}
    base_runs = [f"gpt2_adamw_none_s{s}" for s in BASE]  # the only ones that say max_iters
    assert record["training_differs"] == {"max_iters": {"20": base_runs}}
    # the settings as `make savedefconfig` writes them: here nothing all runs share
    assert record["settings"] == {} and record["settings_unread"] == []
    differs = record["settings_differs"]
    assert sorted(differs) == [
        "OPTIMIZER_ADAMWSPAM",
        "PRUNING_MODE_SINGLE",
        "PRUNING_TARGET_SPARSITY",
        "TRAIN_SEED",
    ]  # the method's symbol is y or default: magnitude's is the default method
    spam_runs = [f"gpt2_adamwspam_none_s{s}" for s in (1, 2, 3)]
    assert differs["OPTIMIZER_ADAMWSPAM"]["y"] == spam_runs
    assert sorted(differs["TRAIN_SEED"]) == ["1", "2", "3", "4"]
    assert differs["PRUNING_TARGET_SPARSITY"]['"0.9"'] == [
        f"gpt2_adamw_magnitude_90_s{s}" for s in (1, 2, 3, 4)
    ]  # 0.5 is the default: those runs hold the default
    assert [m["model"] for m in record["models"]] == ["gpt2"]
    configurations = {c["key"]: c["seeds"] for c in record["models"][0]["configurations"]}
    assert {
        int(s): v["figures"]["best_ppl"] for s, v in configurations["gpt2_adamw_none"].items()
    } == (BASE)
    assert configurations["gpt2_adamwspam_none"]["3"]["status"] == "failed"
    assert configurations["gpt2_adamw_magnitude_90"]["3"]["status"] == "running"
    again = parse_seed_tables("## Seed statistics\n" + "\n".join(seeds_tables_from_record(record)))
    assert again == parse_seed_tables(seeded.md)
    rows = by_config(again["gpt2"][2])
    assert len(rows) == 4 and rows["gpt2_adamw_magnitude_50"]["paired Δ best ppl"].startswith(
        "+10.0"
    )


def seeds_tables_from_record(record: dict) -> list[str]:
    from lib.results.tables import seed_table_lines

    return seed_table_lines(seed_record.from_record(record["models"]), recorded=True)


def test_seed_record_of_another_shape_is_refused():
    with pytest.raises(ValueError, match="best_ppl='1.5' is not a number"):
        seed_record.from_record(
            [
                {
                    "model": "gpt2",
                    "baseline": None,
                    "figures": [{"header": "best ppl", "name": "best_ppl", "spec": ".2f"}],
                    "configurations": [
                        {
                            "key": "a",
                            "seeds": {"1": {"status": "completed", "figures": {"best_ppl": "1.5"}}},
                        }
                    ],
                }
            ]
        )


def test_seed_record_without_best_perplexity_has_no_paired_column_values():
    loss = {"header": "best val loss", "name": "best_val_loss", "spec": ".3f"}
    record = [
        {
            "model": "gpt2",
            "baseline": "a",
            "figures": [loss],
            "configurations": [
                {"key": k, "seeds": {"1": {"status": "completed", "figures": {"best_val_loss": v}}}}
                for k, v in (("a", 2.0), ("b", 2.5))
            ],
        }
    ]
    (group,) = seed_record.from_record(record)
    assert [(r.config.key, r.versus, r.spreads["best_val_loss"].mean) for r in group.rows] == [
        ("a", None, 2.0),
        ("b", None, 2.5),
    ]


def test_seed_record_names_the_settings_every_run_shares(tmp_path):
    """A setting given to the whole sweep (SET=, or the base config) is in the
    record and its page note, the per-run ones by name; a run whose config.txt
    does not read is named."""
    from lib.config.kconfig import open_tree
    from lib.config.run_config import write_outputs

    rows = []
    for seed in (1, 2):
        folder = tmp_path / f"gpt2_adamw_none_s{seed}"
        folder.mkdir()
        kconf = open_tree()
        kconf.syms["GPT2_MAX_ITERS"].set_value("450")
        kconf.syms["WEIGHT_DECAY"].set_value("0.05")
        kconf.syms["TRAIN_SEED"].set_value(str(seed))
        write_outputs(kconf, folder / "config.txt", folder / "config.py")
        rows.append(RunRow(folder.name, folder, "completed"))
    # a run written before a rename: its old name counts as the current one
    old = rows[1].path / "config.txt"
    old.write_text(old.read_text().replace("CONFIG_WEIGHT_DECAY=", "CONFIG_ADAMW_WEIGHT_DECAY="))
    broken = tmp_path / "gpt2_adamw_none_s3"
    broken.mkdir()
    (broken / "config.txt").write_bytes(b"CONFIG_TRAIN_SEED=\xff\n")
    rows.append(RunRow(broken.name, broken, "completed"))
    record = json.loads(seed_record.write(rows, [], tmp_path))
    assert record["settings"] == {"GPT2_MAX_ITERS": "450", "WEIGHT_DECAY": '"0.05"'}
    assert record["settings_differs"] == {
        "TRAIN_SEED": {"1": [rows[0].run_id], "2": [rows[1].run_id]}
    }
    assert record["settings_unread"] == [broken.name]
    note = seed_record.table_lines([(tmp_path / "seeds.json", record)])[2]
    assert note.endswith(
        '; settings besides Kconfig\'s defaults: `GPT2_MAX_ITERS=450`, `WEIGHT_DECAY="0.05"` '
        "(and per run: TRAIN_SEED)."
    )


def test_the_curves_leave_out_seeds_that_did_not_finish(tmp_path):
    """Two of three seeds failed: no band, and the curves are the finished seed's only
    (all three were drawn); a configuration's one run is drawn whatever its state."""
    from lib.results.collect import RunRow

    curve = {"val_loss": {"iters": [10, 20], "values": [5.0, 4.0]}}

    def row(run_id, status, seed):
        return RunRow(
            run_id,
            tmp_path / run_id,
            status,
            model="gpt2",
            optimizer="adamw",
            seed=seed,
            best_ppl=50.0,
            metrics=curve,
        )

    rows = [
        row("gpt2_adamw_none_s1", "completed", 1),
        row("gpt2_adamw_none_s2", "failed", 2),
        row("gpt2_adamw_none_s3", "failed", 3),
        row("gpt2_adamwspam_none", "diverged", None),
    ]
    rows[3].optimizer = "adamwspam"
    labels_drawn = [s.label for s in curves._series(rows, "val_loss")]
    assert len(labels_drawn) == 2, labels_drawn
    assert "(seed 1)" in labels_drawn[0] and "(diverged)" in labels_drawn[1], labels_drawn
