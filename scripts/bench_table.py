"""Folders of `make bench` records as tables in docs/benchmarks.md.

    .venv/bin/python scripts/bench_table.py [FOLDER ...] [--check]

Reads every *step_*.json `make bench` wrote into each FOLDER (default: every folder
of docs/bench-data with a table in the page: cpu-avx2, cpu-xeon, cpu) and rewrites the
table between that folder's markers in docs/benchmarks.md: per record, the settings
that differ between the folder's records (those all share are said once above the
table), the linear-layer kernel our side ran, the step comparison (ours and the plain
loop, ms/iter, and ours' speed as a multiple of the plain loop's, per round too), the
peak memory, where ours' step time went (the profile `make bench` prints) and the
whole-loop comparison (the trainer's time per step as a multiple of the plain loop's).
A figure a record does not hold (older records lack the whole loop and the kernel) is
an em dash. With no FOLDER it also fills every bench-record block of docs/*.md: a block
that names records under docs/bench-data by a pattern (h100/optimizers_*.json) gets
their table, by their kind: step records' loops (ms/iter, tokens/s, MFU), optimizer
records' steps against AdamW's and AdamWPrune's mask work, sequence-length records'
variants at each length, linear records' kernels' GFLOP/s per shape, precision records'
gradient changes under bf16 autocast, seeds records (`make
results`' summary_seeds.json) the seed tables of a matrix (lib/results/tables.py).
--check writes nothing and exits 1 when a table differs.
tests/lib/results/test_bench_tables.py checks the page holds what the records say.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from lib.cli import run_script
from lib.doc_blocks import BlockError
from lib.results.bench_tables import folders, records


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="*", type=Path)
    parser.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 when a table differs"
    )
    args = parser.parse_args(argv)
    page, stale = folders.PAGE, False
    for folder in (f.resolve() for f in args.folder or folders.table_folders(page)):
        if not folders.records(folder):
            print(f"error: {folder} holds no {folders.PATTERN} from `make bench`.", file=sys.stderr)
            return 1
        begin, _ = folders.markers(folder)
        if begin not in page.read_text():  # before rendering, which reads the folder's records
            print(f"error: {page} has no '{begin}' marker for this folder.", file=sys.stderr)
            return 1
        diff = folders.rewrite_page(folder, page, check=args.check)
        if diff and args.check:
            print(f"{page}: differs from {folder} (run `{Path(__file__).name}` without --check)")
            print(diff, end="")
            stale = True
    if not args.folder:  # every chosen-records block, in benchmarks.md or another page
        for other, diff in records.rewrite_pages(check=args.check):
            if args.check:
                print(
                    f"{other}: its bench-record tables differ from their records (run without --check)"
                )
                print(diff, end="")
                stale = True
    return 1 if stale else 0


if __name__ == "__main__":
    run_script(main, (BlockError,))
