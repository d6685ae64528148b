"""kconfig-llm beside karpathy/nanoGPT on nanoGPT's own work, recorded, then rendered.

  scripts/nanogpt_compare.py run --nanogpt DIR --data DIR [--pairs 2] [--checkout DIR]
                                 [--label LABEL] [--out FILE] [--seeds S1,S2,..]
                                 [--ours-set "SYMBOL=value ..."]
      feeds a scratch nanoGPT checkout (DIR/data/shakespeare_char: train.bin and
      val.bin linked to our prepared character data, meta.pkl written; files of
      the same names there are replaced) and runs, back to back and alternating,
      `make` on defconfigs/gpt2-shakespeare-char in our checkout and nanoGPT's
      train.py with its README's CPU command (4 layers x 4 heads x 128, block 64,
      batch 12, 2000 iterations, dropout 0, no compile), PAIRS times each. Keeps
      each process's wall clock, its ms/iter and tokens/s and its final validation
      loss, and the ratios ours/nanoGPT, in docs/bench-data/nanogpt/<label>.json,
      then renders. After each pair, both final models are scored by our code on
      every token of the validation split (disjoint windows of the block): one
      estimator for both, where each trainer's own figure averages 20 random
      batches. --seeds S1,S2,..: pair i runs both sides at seed S_i (cycling),
      ours at TRAIN_SEED=S_i and nanoGPT through a config file written into its
      checkout (config/nanogpt_compare_seed.py), which shifts the seed its
      train.py fixes (1337) to S_i; the log must show the shift, once. Then the
      losses on every token compare over seeds (Welch's t-test). --ours-set adds
      settings to ours' `make SET=` (CPU_MALLOC_KEEP=n: ours without one of its
      options, against the same nanoGPT); the record and its table say so.
      --data is the prepared folder (DATA_DIR/shakespeare-char of
      `make prepare` on that defconfig); `make defconfig-gpt2-shakespeare-char`
      rewrites the checkout's .config first.
  scripts/nanogpt_compare.py render [--check]
      rewrites the block between the nanogpt-compare markers in docs/benchmarks.md
      from every docs/bench-data/nanogpt/*.json (--check: exit 1 when it differs)

nanoGPT runs from its own checkout, outside this repository: none of its code is here.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

from lib.atomic import write_json_atomic
from lib.cli import run_script
from lib.data.sources import DataError
from lib.doc_blocks import BlockError
from lib.paths import from_root
from lib.results.nanogpt import table
from lib.results.nanogpt.pairs import compare
from lib.results.nanogpt.work import ITERS, CompareError, check_ours_set


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run both sides alternately and keep the record")
    run.add_argument("--nanogpt", type=Path, required=True, help="a scratch nanoGPT checkout")
    run.add_argument("--data", type=Path, required=True, help="DATA_DIR/shakespeare-char")
    run.add_argument("--pairs", type=int, default=2, help="ours-then-nanoGPT pairs (2)")
    run.add_argument("--checkout", type=Path, default=from_root("."), help="ours (this one)")
    run.add_argument("--label", help="the record's name (default: kernels and time)")
    run.add_argument("--out", type=Path, help="default docs/bench-data/nanogpt/<label>.json")
    run.add_argument("--python", default=sys.executable, help="nanoGPT's interpreter")
    run.add_argument("--iters", type=int, default=ITERS, help="only to try the script out")
    run.add_argument(
        "--seeds", help="ours' TRAIN_SEED per pair, cycling, e.g. 1337,1338,1339 (the defconfig's)"
    )
    run.add_argument(
        "--ours-set", default="", help="more of ours' settings, e.g. CPU_MALLOC_KEEP=n (none)"
    )
    check = sub.add_parser("render", help="rewrite docs/benchmarks.md's block")
    check.add_argument("--check", action="store_true", help="only say whether it differs")
    args = p.parse_args(argv)
    if args.command == "render":
        return 1 if not table.render(args.check) and args.check else 0
    if args.pairs < 1:
        raise CompareError("--pairs must be at least 1")
    label = args.label or datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    if not re.fullmatch(r"[A-Za-z0-9][\w.-]{0,60}", label):
        raise CompareError(f"--label {label!r}: letters, digits, '.', '_' and '-' only")
    out = args.out or from_root(table.RECORD_DIR) / f"{label}.json"
    try:
        seeds = [int(x) for x in args.seeds.split(",")] if args.seeds else None
    except ValueError:
        raise CompareError(f"--seeds {args.seeds!r}: whole numbers separated by commas") from None
    record = compare(
        args.nanogpt.resolve(),
        args.data,
        args.pairs,
        args.checkout.resolve(),
        label,
        args.python,
        args.iters,
        seeds,
        ours_set=check_ours_set(args.ours_set),
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(out, record)
    print(f"wrote {out}: ours' tokens/s {record['median']['tokens_per_sec']:.3f}x nanoGPT's")
    if out.resolve().parent == from_root(table.RECORD_DIR).resolve():
        table.render(check=False)
    return 0


if __name__ == "__main__":
    run_script(main, (CompareError, BlockError, DataError, OSError, subprocess.CalledProcessError))
