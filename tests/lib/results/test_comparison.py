"""Our runs and pretrained baselines in one table, sorted on bits per byte."""

from __future__ import annotations

import csv
import io
import json
import math

from lib.results.summary import compare, summarize
from tests.lib.results.conftest import make_run


class Table:
    """The comparison's Markdown table, parsed back: header and rows of cells."""

    def __init__(self, md: str) -> None:
        section = md.split("## Comparison on bits per byte\n", 1)[1]
        lines = section.split("\n\n| ", 1)[1].split("\n\n", 1)[0].splitlines()
        lines[0] = "| " + lines[0]
        cells = [[c.strip() for c in ln[1:-1].split("|")] for ln in lines]
        assert lines[1] == "|" + "|".join(["---"] * len(cells[0])) + "|"
        self.header, self.rows = cells[0], [dict(zip(cells[0], r)) for r in cells[2:]]

    def column(self, name: str) -> list[str]:
        return [r[name] for r in self.rows]


def text_entry(nll: float, tokens: int, n_bytes: int = 1000, words: int = 200) -> dict:
    """A perplexity entry as lib/eval/suite.py writes it for a whole text."""
    return {
        "kind": "perplexity",
        "perplexity": math.exp(nll / tokens),
        "nll": nll,
        "tokens": tokens,
        "bytes": n_bytes,
        "bits_per_byte": nll / n_bytes / math.log(2),
        "words": words,
        "word_perplexity": math.exp(nll / words),
    }


def write_eval(folder, sets: dict, params: int | None = None, tok_s: float = 1000.0) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    record = {
        "format": 1,
        "model": {"family": "llama", "source": "pretrained", "params": params},
        "measured": {"tokens_per_sec": tok_s, "peak_memory_mb": 2048.0, "machine": "NVIDIA H100"},
        "sets": sets,
    }
    (folder / "eval.json").write_text(json.dumps(record))


def test_bits_per_byte_decides_where_token_perplexity_would_mislead(tmp_path):
    results = tmp_path / "results"
    run = make_run(results, "gpt2_adamw_none", 80.0)
    # A small vocabulary makes many cheap tokens: the lowest token perplexity here
    # (e^(700/400) = 5.75) and the most bits per byte (700 nats / 1000 bytes).
    write_eval(
        results / "baseline-small-vocab", {"wikitext-2": text_entry(700.0, 400)}, 135_000_000
    )
    write_eval(
        results / "baseline-big-vocab", {"wikitext-2": text_entry(600.0, 150)}, 1_100_000_000
    )
    write_eval(run, {"wikitext-2": text_entry(650.0, 250), "val": {"skipped": "x"}}, tok_s=5e4)
    md, files = compare(
        results, ["gpt2_adamw_none", "baseline-small-vocab", "baseline-big-vocab"], tmp_path / "o"
    )
    assert md.startswith("## Comparison on bits per byte")
    table = Table(md)
    assert table.column("model") == [
        "baseline-big-vocab",
        "gpt2_adamw_none",
        "baseline-small-vocab",
    ]
    assert table.column("wikitext-2 bpb") == [
        f"{nll / 1000 / math.log(2):.4f}" for nll in (600.0, 650.0, 700.0)
    ]
    assert table.column("wikitext-2 token ppl") == ["54.60", "13.46", "5.75"]
    assert table.column("wikitext-2 word ppl") == [
        f"{math.exp(n / 200):.2f}" for n in (600, 650, 700)
    ]
    assert table.column("kind") == ["baseline", "ours", "baseline"]
    assert table.column("params M") == ["1,100.0", "33.6", "135.0"]  # ours: metrics.json
    assert table.column("eval tok/s") == ["1,000", "50,000", "1,000"]
    assert "sorted on wikitext-2 bits per byte" in md and "Bits per byte decides" in md
    assert "all measured on NVIDIA H100" in md
    (out,) = [f for f in files if f.name == "summary_bpb.csv"]
    rows = list(csv.DictReader(io.StringIO(out.read_text())))
    assert [r["model"] for r in rows] == table.column("model")
    assert "tab:bits-per-byte" in (tmp_path / "o" / "summary.tex").read_text()


def test_the_set_most_rows_share_decides_and_no_bpb_means_no_table(tmp_path):
    root = tmp_path / "runs"
    write_eval(root / "baseline-a", {"text": text_entry(10, 5), "wikitext-2": text_entry(900, 9)})
    write_eval(root / "baseline-b", {"text": text_entry(20, 5)})
    write_eval(root / "baseline-c", {"wikitext-2": {"kind": "perplexity", "perplexity": 3.0}})
    md, _, _ = summarize(root)
    table = Table(md)
    assert table.column("model") == ["baseline-a", "baseline-b"]  # c has no bits per byte
    assert table.header[4:7] == ["text bpb", "text word ppl", "text token ppl"]
    make_run(tmp_path / "plain", "gpt2_adamw_none", 80.0)
    md, files, _ = summarize(tmp_path / "plain")
    assert "bits per byte" not in md and not any(f.name == "summary_bpb.csv" for f in files)


def test_report_shows_the_comparison(tmp_path):
    from lib.results.report import build_report

    root = tmp_path / "runs"
    write_eval(root / "baseline-a", {"text": text_entry(10, 5)})
    page, _ = build_report(root)
    text = page.read_text()
    assert "<h2>Comparison on bits per byte</h2>" in text and "Bits per byte decides" in text
