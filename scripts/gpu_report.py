"""File gpu_check.json records and regenerate docs/benchmarks.md's GPU section.

    scripts/gpu_report.py results/gpu-check-<date>/gpu_check.json [more.json ...]

copies each record (and its plots) to docs/bench-data/<gpu>/gpu_check_<date>.json
and rewrites the part of docs/benchmarks.md between its gpu-check markers
from them: environment, each stage's status and time, the goals met or not,
the figures. Several records of one GPU (short windows that each ran some
stages) combine: each stage from its newest finished run. A record from
DEVICE=cpu is refused unless --allow-cpu (tests).
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

from lib.atomic import write_text_atomic
from lib.bench.gpucheck.record import BENCH_DATA, combine, filed_path, not_combined
from lib.bench.gpucheck.report import render, replace_section
from lib.cli import run_script

ROOT = Path(__file__).resolve().parent.parent


def main(argv: list[str]) -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("records", type=Path, nargs="+", help="gpu_check.json files of one GPU")
    p.add_argument("--bench-data", type=Path, default=BENCH_DATA)
    p.add_argument("--benchmarks", type=Path, default=ROOT / "docs" / "benchmarks.md")
    p.add_argument("--allow-cpu", action="store_true", help="accept a DEVICE=cpu record")
    args = p.parse_args(argv)
    records = [_read(path, args.allow_cpu) for path in args.records]  # all read, then filed
    record = combine(records) if len(records) > 1 else records[0]
    filed = [_file(r, path, args.bench_data) for r, path in zip(records, args.records)]
    page = args.benchmarks.parent
    shown = ", ".join(f"`{f.relative_to(page) if f.is_relative_to(page) else f}`" for f in filed)
    text = args.benchmarks.read_text() if args.benchmarks.is_file() else "# Measured figures\n"
    section = render(record, shown)
    write_text_atomic(args.benchmarks, replace_section(text, section, str(args.benchmarks)))
    print(
        f"filed {', '.join(str(f) for f in filed)}; regenerated the GPU section of "
        f"{args.benchmarks}"
    )
    others = not_combined(filed)
    if others:
        # A check that ran in several windows shows all its stages only when every
        # window's record is named.
        print(
            f"not in the section: {len(others)} other record(s) of this GPU "
            f"({', '.join(o.name for o in others[-3:])}{', ...' if len(others) > 3 else ''}); "
            "name those of the same check too to combine their stages"
        )


def _read(path: Path, allow_cpu: bool) -> dict:
    try:
        record = json.loads(path.read_text())
        env = record["environment"]
    except (OSError, ValueError, KeyError) as err:
        raise ValueError(f"{path} is not a gpu_check.json ({err})") from err
    if env.get("device") != "cuda" and not allow_cpu:
        raise ValueError(
            f"{path} was taken on {env.get('device_name')}, not a GPU: "
            f"docs/benchmarks.md's GPU section takes CUDA records only"
        )
    return record


def _file(record: dict, source: Path, bench_data: Path) -> Path:
    """docs/bench-data/<gpu>/gpu_check_<date>.json and its plots beside it."""
    filed = filed_path(record, bench_data)
    filed.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(filed, json.dumps(record, indent=1) + "\n")
    for png in record.get("plots", []):
        if (source.parent / png).is_file():
            shutil.copy2(source.parent / png, filed.with_name(f"{filed.stem}_{png}"))
    return filed


if __name__ == "__main__":
    run_script(main, (ValueError,))
