"""Live state of the latest run or matrix: `make watch [RUN=<dir>] [INTERVAL=2]`.

Refreshes every INTERVAL seconds until Ctrl-C; --once prints one view and exits.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from lib.cli import run_script
from lib.matrix.watch import render
from lib.paths import DEFAULT_RESULTS


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument(
        "path",
        nargs="?",
        default=str(DEFAULT_RESULTS / "latest"),
        help="a run folder or a matrix folder (default: results/latest)",
    )
    p.add_argument("--interval", type=float, default=2.0, help="seconds between refreshes")
    p.add_argument("--once", action="store_true", help="print once and exit")
    args = p.parse_args(argv)
    if args.interval <= 0:
        p.error("--interval must be > 0")
    if args.once:
        print(render(Path(args.path)))
        return 0
    try:
        while True:
            view = render(Path(args.path))
            sys.stdout.write(
                "\033[H\033[2J" + view + f"\n\n(every {args.interval:g}s; Ctrl-C to quit)\n"
            )
            sys.stdout.flush()
            time.sleep(args.interval)
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    run_script(main)
