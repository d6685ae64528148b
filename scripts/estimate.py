"""Predict training memory and time for the configuration: `make estimate`.

Arguments are NAME=VALUE overrides as for `make` (BATCH_SIZE=16 ...).
--device H100 estimates for a known GPU instead of the device present.
--validate runs a few real training steps per reference configuration on
the device present and prints estimate against measured peak (JSON: --out).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from lib.cli import run_script
from lib.config.run_config import load_run_config, run_config_from_defaults


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("overrides", nargs="*", help="NAME=VALUE overrides, as for make")
    p.add_argument("--device", help="a known GPU to estimate for (H100, A100 40GB, L4, ...)")
    p.add_argument("--vocab", type=int, help="vocabulary size (default: the tokenizer's)")
    p.add_argument(
        "--validate",
        action="store_true",
        help="measure reference configurations on this device against the estimate",
    )
    p.add_argument("--cases", default="", help="with --validate: only cases containing this text")
    p.add_argument("--steps", type=int, default=3, help="with --validate: steps per case")
    p.add_argument("--out", type=Path, help="write the result as JSON to this file")
    return p.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    if args.validate:
        return validate(args)
    from lib.estimate import estimate_memory
    from lib.estimate.report import report
    from lib.hardware.devices import profile, profile_info
    from lib.matrix.grid import one_run

    run = one_run(load_run_config(args.overrides), "make estimate")
    info = profile_info(profile(args.device)) if args.device else None
    print(report(run, info, args.vocab))
    if args.out:
        est = estimate_memory(run, args.vocab, device_info=info)
        args.out.write_text(json.dumps(est.as_dict(), indent=2) + "\n")
    return 0


def validate(args: argparse.Namespace) -> int:
    import torch

    from lib.bench.memory import CPU_CASES, CPU_VOCAB, GPU_CASES
    from lib.bench.memory import validate as check

    on_gpu = torch.cuda.is_available()
    cases = {k: v for k, v in (GPU_CASES if on_gpu else CPU_CASES).items() if args.cases in k}
    rows = check(run_config_from_defaults, cases, args.steps, None if on_gpu else CPU_VOCAB)
    device = torch.cuda.get_device_name() if on_gpu else "cpu"
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(
            json.dumps({"device": device, "torch": torch.__version__, "cases": rows}, indent=2)
            + "\n"
        )
    return 0


if __name__ == "__main__":
    run_script(main, (ValueError,))
