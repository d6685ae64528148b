"""Download the wheels a GPU node without network needs: `make gpu-wheels`.

Every distribution of lib/bench/gpucheck/wheels.py's CARRIED list, at the
version requirements*.txt pins, as a wheel for CPython GPU_WHEELS_PYTHON
(default 312) on manylinux x86_64, into .whl/ (git-ignored). Wheels already
there are kept; a second version of a distribution is refused. Copy .whl/
along with the tree to the GPU box; `make gpu-check` installs them into a
scratch folder there.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from lib.bench.gpucheck.wheels import (
    MAX_BYTES,
    WHEEL_DIR,
    carried_pins,
    download_command,
    normalise,
    wheel_name,
)


def main(argv: list[str]) -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--dest", type=Path, default=WHEEL_DIR)
    p.add_argument(
        "--python",
        default=os.environ.get("GPU_WHEELS_PYTHON") or "312",
        help="CPython version of the GPU node, e.g. 312 or 311",
    )
    args = p.parse_args(argv)
    if not args.python.isdigit():
        raise ValueError(
            f"GPU_WHEELS_PYTHON={args.python!r}: give the version as digits, "
            f"e.g. 312 for Python 3.12"
        )
    args.dest.mkdir(parents=True, exist_ok=True)
    for pin in carried_pins():
        name, version = pin.split("==")
        have = [w for w in args.dest.glob("*.whl") if wheel_name(w.name) == normalise(name)]
        if any(f"-{version}-" in w.name for w in have):
            continue
        if have:
            raise ValueError(
                f"{args.dest} holds {have[0].name}, another version than {pin}: "
                f"remove it, then run `make gpu-wheels` again"
            )
        print(f"gpu-wheels: {pin}")
        done = subprocess.run(
            download_command(pin, args.dest, args.python), capture_output=True, text=True
        )
        if done.returncode != 0:
            raise RuntimeError(
                f"pip could not download {pin} for cp{args.python}:\n"
                + "\n".join(done.stderr.strip().splitlines()[-6:])
            )
    wheels = sorted(args.dest.glob("*.whl"))
    total = sum(w.stat().st_size for w in wheels)
    print(f"gpu-wheels: {len(wheels)} wheels, {total / 2**20:.1f} MiB in {args.dest}")
    if total > MAX_BYTES:
        raise RuntimeError(
            f"{args.dest} holds {total / 2**20:.1f} MiB, over the "
            f"{MAX_BYTES // 2**20} MiB kept for a tree copied to a GPU node: trim CARRIED "
            f"in lib/bench/gpucheck/wheels.py"
        )


if __name__ == "__main__":
    # Not lib.cli.run_script: it imports kconfiglib, which this may run without.
    try:
        main(sys.argv[1:])
    except (ValueError, RuntimeError) as err:
        print(f"error: {err}", file=sys.stderr)
        raise SystemExit(1) from None
