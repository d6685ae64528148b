"""`make results` (summary of results/latest or RESULTS=<dir>, BASELINE=<run-id>),
`make report` (index.html of the same folder) and `make compare RUNS="a b"`
(runs from anywhere under results/)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lib.cli import run_script  # noqa: E402
from lib.results.report import write_report  # noqa: E402
from lib.results.summary import compare, summarize  # noqa: E402
from lib.rundir import configured_results_root  # noqa: E402


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("command", choices=["summary", "report", "compare"])
    p.add_argument("runs", nargs="*", help="compare: run names or paths")
    p.add_argument("--dir", help="summary, report: a matrix or folder of runs "
                                 "(default results/latest)")
    p.add_argument("--baseline", help="run id the delta column compares against")
    p.add_argument("--out", help="compare: output folder")
    args = p.parse_intermixed_args(argv)
    results = configured_results_root()
    if args.command == "compare":
        md, files = compare(results, args.runs, Path(args.out) if args.out else None,
                            args.baseline)
    else:
        root = Path(args.dir) if args.dir else results / "latest"
        if not root.exists():
            raise FileNotFoundError(f"{root} does not exist: run `make test-matrix` first, "
                                    f"or name a folder with RESULTS=<dir>")
        if args.command == "report":
            print(f"wrote {write_report(root.resolve(), args.baseline)}")
            return 0
        md, files, _ = summarize(root.resolve(), args.baseline)
    print(md)
    for f in files:
        print(f"wrote {f}")
    return 0


if __name__ == "__main__":
    run_script(main, (FileNotFoundError, ValueError), error_code=2)
