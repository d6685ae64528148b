"""`make results` (summary of results/latest or RESULTS=<dir>: one run, a matrix or
any folder of runs; BASELINE=<run-id>, else .config's RESULTS_BASELINE_RUN_ID),
`make report` (index.html of the same folder) and `make compare RUNS="a b"`
(runs from anywhere under results/).

A run whose metrics.json or eval.json has a field of the wrong type is shown
with status "invalid" and the file and field, and listed on stderr; the other
runs are summarised as usual.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from lib.cli import run_script
from lib.paths import DOT_CONFIG
from lib.results.collect import INVALID, RunRow, UnknownBaseline, configured_baseline
from lib.results.report import build_report
from lib.results.summary import compare_runs, summarize
from lib.results.tuning import Tuning, load, stale_runs
from lib.run.rundir import RunDirError, configured_results_root, within_results

T = TypeVar("T")


def warn_invalid(rows: list[RunRow]) -> None:
    for r in rows:
        if r.status == INVALID:
            print(f"warning: {r.run_id} is invalid: {r.problems[0]}", file=sys.stderr)


def warn_tuning(tuning: Tuning, rows: list[RunRow]) -> None:
    """A tuned matrix's unreadable records and disagreements (also in the summary)."""
    for problem in tuning.problems + stale_runs(tuning, rows):
        print(f"warning: {problem}", file=sys.stderr)


def with_baseline(make: Callable[[str | None], T], given: str | None) -> T:
    """make(baseline): BASELINE= as given, else .config's RESULTS_BASELINE_RUN_ID,
    which falls back to the automatic baseline, with a warning, where the folder
    shown lacks that run (the setting names one study's run; RESULTS= may show
    another's)."""
    if given is not None:
        return make(given or None)
    configured = configured_baseline(DOT_CONFIG)
    try:
        return make(configured)
    except UnknownBaseline:
        if configured is None:
            raise
        print(
            f'warning: CONFIG_RESULTS_BASELINE_RUN_ID="{configured}" is not among these '
            f"runs; using the automatic baseline (BASELINE=<run> picks another)",
            file=sys.stderr,
        )
        return make(None)


def summary_folder(given: str | None) -> Path:
    """The folder summarised and written into, resolved once: RESULTS=<dir> (the
    user's choice, anywhere), else what results/latest leads to, which must stay
    in the results folder (lib/run/rundir.py within_results)."""
    results, root = None, Path(given or ".")
    if not given:
        results = configured_results_root(instead="RESULTS=<dir>")
        root = results / "latest"
    if not root.is_dir():
        raise FileNotFoundError(
            f"{root} is not a folder: train a run with `make` (or a matrix with "
            f"`make test-matrix`) first, or pass RESULTS=<dir>: a run folder, a matrix "
            f"folder, or a folder of run folders"
        )
    if results is None:
        return root.resolve()
    return within_results(root, results, "nothing was written", "RESULTS=<dir>")


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("command", choices=["summary", "report", "compare"])
    p.add_argument("runs", nargs="*", help="compare: run names or paths")
    p.add_argument(
        "--dir",
        help="summary, report: a run, a matrix or a folder of runs (default results/latest)",
    )
    p.add_argument(
        "--baseline",
        help="run id the delta column compares against (default: "
        ".config's RESULTS_BASELINE_RUN_ID, else automatic)",
    )
    p.add_argument("--out", help="compare: output folder")
    args = p.parse_intermixed_args(argv)
    tuning = Tuning()  # `make compare` picks runs, not a tuned matrix
    if args.command == "compare":
        results = configured_results_root(instead='RUNS="<run folder> <run folder>"')
        out = Path(args.out) if args.out else None
        md, files, rows = with_baseline(
            lambda b: compare_runs(results, args.runs, out, b), args.baseline
        )
    else:  # RESULTS=<dir> needs no .config
        root = summary_folder(args.dir)
        tuning = load(root)  # read once, warned about once
        if args.command == "report":
            path, rows = with_baseline(lambda b: build_report(root, b, tuning), args.baseline)
            print(f"wrote {path}")
            warn_invalid(rows)
            warn_tuning(tuning, rows)
            return 0
        md, files, rows = with_baseline(lambda b: summarize(root, b, tuning), args.baseline)
    print(md)
    for f in files:
        print(f"wrote {f}")
    warn_invalid(rows)
    warn_tuning(tuning, rows)
    return 0


if __name__ == "__main__":
    run_script(main, (FileNotFoundError, ValueError, RunDirError), error_code=2)
