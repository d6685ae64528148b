"""File a gpu_check.json and regenerate docs/benchmarks.md's GPU section.

    scripts/gpu_report.py results/gpu-check-<date>/gpu_check.json

copies the record (and its plots) to docs/bench-data/<gpu>/gpu_check_<date>.json
and rewrites the part of docs/benchmarks.md between its gpu-check markers
from it: environment, each stage's status and time, the goals met or not,
the figures. A record from DEVICE=cpu is refused unless --allow-cpu (tests).
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

from lib.atomic import write_text_atomic
from lib.bench.gpucheck.record import BENCH_DATA, filed_path
from lib.bench.gpucheck.report import render, replace_section
from lib.cli import run_script

ROOT = Path(__file__).resolve().parent.parent


def main(argv: list[str]) -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("record", type=Path, help="a gpu_check.json")
    p.add_argument("--bench-data", type=Path, default=BENCH_DATA)
    p.add_argument("--benchmarks", type=Path, default=ROOT / "docs" / "benchmarks.md")
    p.add_argument("--allow-cpu", action="store_true", help="accept a DEVICE=cpu record")
    args = p.parse_args(argv)
    try:
        record = json.loads(args.record.read_text())
        env = record["environment"]
    except (OSError, ValueError, KeyError) as err:
        raise ValueError(f"{args.record} is not a gpu_check.json ({err})") from err
    if env.get("device") != "cuda" and not args.allow_cpu:
        raise ValueError(
            f"{args.record} was taken on {env.get('device_name')}, not a GPU: "
            f"docs/benchmarks.md's GPU section takes CUDA records only"
        )
    filed = filed_path(record, args.bench_data)
    filed.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(filed, json.dumps(record, indent=1) + "\n")
    for png in record.get("plots", []):
        source = args.record.parent / png
        if source.is_file():
            shutil.copy2(source, filed.with_name(f"{filed.stem}_{png}"))
    shown = (
        filed.relative_to(args.benchmarks.parent)
        if filed.is_relative_to(args.benchmarks.parent)
        else filed
    )
    text = args.benchmarks.read_text() if args.benchmarks.is_file() else "# Measured figures\n"
    write_text_atomic(args.benchmarks, replace_section(text, render(record, str(shown))))
    print(f"filed {filed}; regenerated the GPU section of {args.benchmarks}")


if __name__ == "__main__":
    run_script(main, (ValueError,))
