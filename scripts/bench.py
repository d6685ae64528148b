"""Benchmark the configured model's training step: `make bench [BENCH_STEPS=N]`."""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lib.atomic import write_json_atomic  # noqa: E402
from lib.bench import run_bench  # noqa: E402
from lib.config import load_run_config  # noqa: E402
from lib.kconfig import ConfigError  # noqa: E402
from lib.rundir import results_root  # noqa: E402


def main(argv: list[str]) -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--steps", type=int, default=10, help="timed steps per round")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("overrides", nargs="*", help="NAME=VALUE configuration overrides")
    args = p.parse_args(argv)
    if args.steps < 1 or args.rounds < 1:
        p.error("--steps and --rounds must be at least 1")
    run = load_run_config(args.overrides)
    r = run_bench(run, steps=args.steps, rounds=args.rounds)
    print(f"{r['params']:,} parameters, batch {r['batch_size']} x accumulation "
          f"{r['gradient_accumulation']} x block {r['model_config']['block_size']}, "
          f"{r['dtype']}, compile {'on' if r['compiled'] else 'off'}, {r['device']}")
    print(f"{'loop':<8}{'ms/iter':>12}{'tokens/s':>14}{'MFU':>8}")
    for name in ("ours", "plain"):
        m = r[name]
        shown = f"{100 * m['mfu']:.1f}%" if m["mfu"] is not None else "n/a"
        print(f"{name:<8}{m['ms_per_iter']:>12.1f}{m['tokens_per_sec']:>14,.0f}{shown:>8}")
    print(f"ours runs at {r['speed_vs_plain']:.3f}x the plain loop's speed "
          f"(>1 is faster); peak memory {r['peak_memory_mb']:.0f} MiB ({r['peak_memory_measure']})")
    out = results_root(run) / "bench" / f"bench_{time.strftime('%Y%m%d-%H%M%S')}.json"
    write_json_atomic(out, r)
    print(f"saved {out}")


if __name__ == "__main__":
    try:
        main(sys.argv[1:])
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        raise SystemExit(1)
