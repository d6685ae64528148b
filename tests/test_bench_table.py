"""docs/benchmarks.md's generated `make bench` tables hold what their records say."""

from __future__ import annotations

import importlib.util
import json

from tests.conftest import ROOT

spec = importlib.util.spec_from_file_location("bench_table", ROOT / "scripts" / "bench_table.py")
assert spec and spec.loader
bench_table = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench_table)


def test_the_page_holds_the_table_its_records_render():
    folder = ROOT / "docs" / "bench-data" / "cpu-avx2"
    assert bench_table.render(folder) in (ROOT / "docs" / "benchmarks.md").read_text()


def test_a_row_reads_each_figure_from_its_record(tmp_path, monkeypatch):
    source = next((ROOT / "docs" / "bench-data" / "cpu-avx2").glob("step_*.json"))
    record = json.loads(source.read_text())
    record["ours"]["ms_per_iter"], record["plain"]["ms_per_iter"] = 12.34, 56.78
    record["speed_vs_plain"], record["speed_vs_plain_rounds"] = 4.6, [4.5, 4.7]
    record["loop"]["ours_vs_plain_time"], record["loop"]["ours_vs_plain_time_rounds"] = 0.5, [0.25]
    folder = tmp_path / "docs" / "bench-data" / "elsewhere"
    folder.mkdir(parents=True)
    (folder / "step_1.json").write_text(json.dumps(record))
    page = tmp_path / "page.md"
    begin, end = bench_table.markers(folder)
    page.write_text(f"before\n{begin}\nstale\n{end}\nafter\n")
    monkeypatch.setattr(bench_table, "ROOT", tmp_path)
    bench_table.rewrite_page(folder, page)
    text = page.read_text()
    assert text.startswith("before\n") and text.endswith("\nafter\n") and "stale" not in text
    assert "| 12.3 | 56.8 | 4.600x | 4.500 / 4.700 |" in text
    assert "| 0.500x | 0.250 |" in text
