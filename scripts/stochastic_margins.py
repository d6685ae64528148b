"""Measure the margins of the stochastic tests: run them over seeds, thread
counts and CPU kernel sets, and tabulate what each observed.

    .venv/bin/python scripts/stochastic_margins.py [-k EXPR] [--seeds 8] [--threads 1 2 4]
        [--kernels avx512 avx2] [tests/...]

Every run is a pytest process (the CPU kernel set is fixed when torch loads)
with TEST_SEED, TEST_THREADS and the kernel variables set, and TEST_OBSERVE
pointing at one JSON-lines file; tests/stochastic.py's observe() appends the
values there. The table gives, per test and quantity, the minimum and maximum
over all runs and how many runs failed: the spread to write beside a
threshold (docs/development.md, "Thresholds that hold on every host").
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# The environment that makes torch, oneDNN and MKL round as a host with only
# these instructions would (scripts/flaky_gate.sh uses the same sets).
KERNELS = {
    "avx512": {"ATEN_CPU_CAPABILITY": "avx512"},
    "avx2": {
        "ATEN_CPU_CAPABILITY": "avx2",
        "ONEDNN_MAX_CPU_ISA": "AVX2",
        "MKL_ENABLE_INSTRUCTIONS": "AVX2",
    },
    "default": {
        "ATEN_CPU_CAPABILITY": "default",
        "ONEDNN_MAX_CPU_ISA": "SSE41",
        "MKL_ENABLE_INSTRUCTIONS": "SSE4_2",
    },
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", default=["tests"])
    parser.add_argument("-k", default=None, help="pytest -k expression")
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--kernels", nargs="+", default=["avx512", "avx2"], choices=KERNELS)
    parser.add_argument("--jobs", default="auto", help="pytest-xdist workers of the 1-thread runs")
    args = parser.parse_args()

    observed = Path(tempfile.mkstemp(prefix="margins-", suffix=".jsonl")[1])
    failed: dict[str, int] = defaultdict(int)
    runs = 0
    for kernels in args.kernels:
        for threads in args.threads:
            for seed in range(args.seeds):
                env = {
                    **os.environ,
                    **KERNELS[kernels],
                    "TEST_SEED": str(seed),
                    "TEST_THREADS": str(threads),
                    "TEST_OBSERVE": str(observed),
                    # several threads per core must not spin against each other
                    "OMP_WAIT_POLICY": "PASSIVE",
                }
                # one worker per core at one thread; a single worker above that
                jobs = args.jobs if threads == 1 else "1"
                command = [
                    sys.executable,
                    "-m",
                    "pytest",
                    "-q",
                    "-p",
                    "no:randomly",
                    "-n",
                    jobs,
                ]
                command += ["-m", "stochastic", "-rf", *args.paths] + (
                    ["-k", args.k] if args.k else []
                )
                out = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
                runs += 1
                for line in out.stdout.splitlines():
                    if line.startswith("FAILED "):
                        failed[line.split()[1]] += 1
                print(f"{kernels} threads={threads} seed={seed}: exit {out.returncode}", flush=True)

    values: dict[tuple[str, str], list[float]] = defaultdict(list)
    for line in observed.read_text().splitlines():
        row = json.loads(line)
        values[(row["test"], row["name"])].append(row["value"])
    observed.unlink()
    print(
        f"\n{runs} runs: seeds 0-{args.seeds - 1}, threads {args.threads}, kernels {args.kernels}"
    )
    print(f"{'test':<72} {'quantity':<28} {'n':>4} {'min':>10} {'max':>10}")
    for (test, name), seen in sorted(values.items()):
        print(f"{test:<72} {name:<28} {len(seen):>4} {min(seen):>10.4g} {max(seen):>10.4g}")
    for test, count in sorted(failed.items()):
        print(f"FAILED {count} of {runs} runs: {test}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
