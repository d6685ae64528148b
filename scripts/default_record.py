"""The embedded default's figures in the docs, from its recorded run and studies.

  scripts/default_record.py record-run results/<id> [--host slow]
      keeps the run's figures and the `make sample PROMPT="ROMEO:"` text of its
      checkpoint in docs/bench-data/default/run.json, then renders; --host slow
      keeps the time of the same run on a slow host in run-slow.json instead
  scripts/default_record.py record-studies LABEL=<matrix> [LABEL=<matrix> ...]
      keeps the `make tune` studies that chose its settings (each a matrix folder:
      its tuning.json and its final run) in docs/bench-data/default/study.json, then
      renders; the studies recorded before stay, and one given again under its label
      is replaced
  scripts/default_record.py render [--check]
      rewrites the blocks between <!-- default-run:NAME --> markers in README.md,
      docs/getting-started.md and docs/fair-comparisons.md from those records
      (--check: exit 1 when the docs differ from what the records give)

Figures in the docs are never typed by hand: record, then render.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from lib.cli import run_script
from lib.doc_blocks import BlockError
from lib.results.default_run.docs import render
from lib.results.default_run.record import RUN_FILES, RecordError, record_run, record_studies


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    run = sub.add_parser("record-run", help="keep the default's run figures and sample")
    run.add_argument("run", type=Path, help="the run folder of `make` on the default")
    run.add_argument(
        "--host",
        choices=sorted(RUN_FILES),
        default="reference",
        help="slow: the same run on a slow host, whose time the docs give beside the reference",
    )
    study = sub.add_parser("record-studies", help="keep the studies that chose its settings")
    study.add_argument("studies", nargs="+", help="LABEL=<matrix folder of a make tune>")
    check = sub.add_parser("render", help="rewrite the docs' blocks from the records")
    check.add_argument("--check", action="store_true", help="only say whether they differ")
    args = p.parse_args(argv)
    if args.command == "record-run":
        record_run(args.run, args.host)
    elif args.command == "record-studies":
        record_studies(args.studies)
    same = render(check=args.command == "render" and args.check)
    return 1 if args.command == "render" and args.check and not same else 0


if __name__ == "__main__":
    run_script(main, (RecordError, BlockError, OSError))
