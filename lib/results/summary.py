"""Write a folder's summary: summary.md, summary.csv, summary.tex and plots;
summary_seeds.csv and .json too where a configuration ran with several seeds, and
summary_bpb.csv where runs or baselines measured bits per byte (the
comparison across tokenizers, lib/results/comparison.py).

Every file is built first and moved into place only when all are built
(lib/results/outputs.py): a summary that fails leaves the previous one as it was.
"""

from __future__ import annotations

import difflib
import time
from pathlib import Path

from lib.plural import counted
from lib.results import comparison, labels, plots, seed_record, seeds, sweep, tables
from lib.results.collect import RunRow, apply_baseline, load_rows, pick_baseline, read_run
from lib.results.outputs import Staging
from lib.results.tuning import Tuning, load, stale_runs, table_csv, table_latex, table_markdown


def write_summary(
    rows: list[RunRow],
    baselines: dict[str, RunRow],
    out: Path,
    header: str = "",
    extra_md: str = "",
    sweep_record: dict | None = None,
    tuning: Tuning | None = None,
) -> tuple[str, list[Path]]:
    """Tables and plots of rows (baseline deltas applied) into out, all or
    nothing; returns (markdown, files written). extra_md is appended to the
    table, e.g. a sweep's ranking; sweep_record adds the sweep's plots.
    With several seeds of a configuration the seed tables lead (per-run tables
    follow under "## Runs"); with one seed each, one line says so. A tuned
    matrix's tuning (lib/results/tuning.py) leads them all, with its own CSV
    and its tuning curve."""
    groups = seeds.summarize_seeds(rows, baselines)
    per_run = tables.markdown(rows, baselines)
    if seeds.seeded(groups):
        md = tables.seeds_markdown(groups) + "\n## Runs\n\n" + per_run + extra_md
        tex = tables.seeds_latex(groups) + "\n" + tables.latex(rows, baselines)
    else:
        md, tex = seeds.ONE_SEED + "\n\n" + per_run + extra_md, tables.latex(rows, baselines)
    across = comparison.markdown(rows)  # runs and baselines on bits per byte, where measured
    if across:
        md, tex = across + "\n" + md, comparison.latex(rows) + "\n" + tex
    if tuning is not None and (tuning or tuning.problems):
        md = table_markdown(tuning, tuning.problems + stale_runs(tuning, rows)) + "\n" + md
    if tuning:
        names = labels.names(seeds.configurations(rows))
        tex = table_latex(tuning, names) + "\n" + tex
    with Staging(out) as stage:
        files = [
            stage.text("summary.md", header + md),
            stage.text("summary.csv", tables.csv_text(rows)),
            stage.text("summary.tex", tables.TEX_PREAMBLE + tex),
            *plots.write_all(rows, baselines, stage.dir, tuning),
        ]
        if seeds.seeded(groups):
            files.append(stage.text("summary_seeds.csv", tables.seeds_csv(groups)))
            files.append(stage.text("summary_seeds.json", seed_record.write(rows, groups, out)))
        if across:
            files.append(stage.text("summary_bpb.csv", comparison.csv_text(rows)))
        if tuning:
            files.append(stage.text("summary_tuning.csv", table_csv(tuning)))
        if sweep_record:
            files += sweep.plots(
                rows, sweep_record["params"], sweep_record.get("log", []), stage.dir
            )
        return md, stage.commit(files)


def summarize(
    root: Path, baseline: str | None = None, tuning: Tuning | None = None
) -> tuple[str, list[Path], list[RunRow]]:
    """`make results` for a matrix (or any folder of runs); tuning: its studies
    (read from root/tune/ when not given)."""
    rows, matrix, baselines = load_rows(root, baseline)
    counts: dict[str, int] = {}
    for r in rows:
        counts[r.status] = counts.get(r.status, 0) + 1
    state = ", ".join(f"{n} {s}" for s, n in counts.items())
    header = (
        f"# Results: {matrix.get('matrix_id', root.name)}\n\n{counted(len(rows), 'run')}: {state}. "
        f"Written {time.strftime('%Y-%m-%d %H:%M')} by `make results`.\n\n"
    )
    sweep_record = matrix.get("sweep")
    extra = "\n" + sweep.ranking(rows, sweep_record["params"]) if sweep_record else ""
    md, files = write_summary(
        rows, baselines, root, header, extra, sweep_record, load(root) if tuning is None else tuning
    )
    return md, files, rows


def resolve_run(results: Path, name: str) -> Path:
    """A run named by path, or by folder name anywhere under results/."""
    path = Path(name)
    if (path / "config.txt").exists() or (path / "eval.json").exists():
        return path
    found = sorted(
        {
            p.parent
            for pattern in ("config.txt", "eval.json")
            for p in results.rglob(pattern)
            if p.parent.name == name
        }
    )
    if len(found) == 1:
        return found[0]
    if not found:
        names = {p.parent.name for p in results.rglob("config.txt")}
        near = difflib.get_close_matches(name, sorted(names), n=1)
        hint = f" (did you mean '{near[0]}'?)" if near else ""
        raise FileNotFoundError(f"no run named '{name}' under {results}{hint}")
    raise FileNotFoundError(
        f"'{name}' names several runs; give one of these paths: " + ", ".join(str(p) for p in found)
    )


def compare_runs(
    results: Path, names: list[str], out: Path | None, baseline: str | None = None
) -> tuple[str, list[Path], list[RunRow]]:
    """`make compare RUNS="a b"`: the summary of runs from anywhere under results/;
    returns (markdown, files written, rows)."""
    if len(names) < 2:
        raise ValueError('compare needs two or more runs: RUNS="run-a run-b"')
    rows = [read_run(resolve_run(results, n)) for n in names]
    baselines = pick_baseline(rows, baseline)
    apply_baseline(rows, baselines)
    out = out or results / f"compare_{time.strftime('%Y%m%d-%H%M%S')}"
    header = "# Comparison\n\n" + "\n".join(f"- {r.run_id}: {r.path}" for r in rows) + "\n\n"
    return (*write_summary(rows, baselines, out, header), rows)


def compare(
    results: Path, names: list[str], out: Path | None, baseline: str | None = None
) -> tuple[str, list[Path]]:
    """compare_runs without the rows."""
    return compare_runs(results, names, out, baseline)[:2]
