#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# How much sooner a matrix of small runs finishes packed several to a GPU
# (MATRIX_RUNS_PER_GPU) than one run per GPU: the same tiny matrix (the
# gpt2-tiny-shakespeare defconfig on the GPU, BENCH_RUNS seeds of it) is
# trained once per setting in BENCH_MODES, timed from start to end, and the
# figures go to docs/bench-data/packing.json. It trains in a scratch copy of
# the project, so .config and results/ are left as they are.
#
#   scripts/bench_packing.sh                                   # 8 runs: "1" then "auto"
#   BENCH_RUNS=16 BENCH_ITERS=1000 BENCH_MODES="1 4 auto" scripts/bench_packing.sh
#
# Needs a CUDA GPU (BENCH_DEVICE=cpu only checks the plumbing: nothing is
# packed there). PYTHON: an interpreter with requirements.txt installed
# (default .venv/bin/python, else python3). BENCH_SET: more SYMBOL=value words
# for every run; BENCH_OUT: where the JSON goes.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
RUNS=${BENCH_RUNS:-8}
ITERS=${BENCH_ITERS:-500}
MODES=${BENCH_MODES:-1 auto}
DEVICE=${BENCH_DEVICE:-cuda}
OUT=${BENCH_OUT:-$ROOT/docs/bench-data/packing.json}
PY=${PYTHON:-}
if [ -z "$PY" ]; then
    if [ -x "$ROOT/.venv/bin/python" ]; then PY=$ROOT/.venv/bin/python; else PY=python3; fi
fi
if [ "$DEVICE" = cuda ] && ! "$PY" -c 'import sys, torch; sys.exit(not torch.cuda.is_available())'; then
    echo "bench_packing: no CUDA GPU for $PY; run this on a GPU machine" >&2
    exit 1
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for name in Makefile Kconfig requirements.txt requirements-lock.txt pyproject.toml lib gpt2 hamt scripts defconfigs; do
    cp -r "$ROOT/$name" "$work/"
done
cd "$work"
# The copy's own sources run, not the tree an editable install points at.
export PYTHONPATH="$work${PYTHONPATH:+:$PYTHONPATH}"
"$PY" scripts/kconfig.py defconfig gpt2-tiny-shakespeare >/dev/null
if ! "$PY" scripts/prepare.py "DEVICE=$DEVICE" ${BENCH_SET:+"SET=$BENCH_SET"} >"$work/prepare.txt" 2>&1; then
    tail -n 30 "$work/prepare.txt" >&2
    exit 1
fi
common=(YES=1 REUSE=n "DEVICE=$DEVICE" "SEEDS=$RUNS" "MAX_ITERS=$ITERS")
for mode in $MODES; do
    echo "bench_packing: $RUNS runs with MATRIX_RUNS_PER_GPU=$mode"
    start=$(date +%s.%N)
    if ! "$PY" scripts/matrix.py run "${common[@]}" \
            "SET=MATRIX_RUNS_PER_GPU=$mode ${BENCH_SET:-}" >"$work/log-$mode.txt" 2>&1; then
        tail -n 30 "$work/log-$mode.txt" >&2
        exit 1
    fi
    end=$(date +%s.%N)
    echo "$mode $start $end $(readlink -f results/latest)" >>"$work/times.txt"
    sleep 1  # matrix folders are named by the second
done

mkdir -p "$(dirname "$OUT")"
"$PY" - "$work/times.txt" "$OUT" "$DEVICE" "$ITERS" <<'EOF'
"""packing.json: wall time per setting, and the ratio to the first setting."""
import json, sys, time
from datetime import datetime
from pathlib import Path

import torch

times, out, device, iters = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], int(sys.argv[4])


def at(text):
    return datetime.strptime(text, "%Y-%m-%d %H:%M:%S").timestamp()


def most_at_once(runs):
    """Runs training together at the busiest moment (matrix.json's 1 s stamps)."""
    spans = [(at(r["started"]), at(r["ended"])) for r in runs.values()]
    return max(sum(s <= t < max(e, s + 1) for s, e in spans) for t, _ in spans)


modes = {}
for line in times.read_text().split("\n"):
    if not line:
        continue
    mode, start, end, root = line.split(" ", 3)
    runs = json.loads((Path(root) / "matrix.json").read_text())["runs"]
    walls = [json.loads((Path(root) / r / "metrics.json").read_text()).get("wall_time_s")
             for r in runs]
    modes[mode] = {
        "wall_s": round(float(end) - float(start), 2),
        "completed": sum(r["state"] == "completed" for r in runs.values()),
        "runs_at_once": most_at_once(runs),
        "mean_run_wall_s": round(sum(w or 0 for w in walls) / len(walls), 2),
        "gpu_of_run": {r: (v.get("env") or {}).get("CUDA_VISIBLE_DEVICES") for r, v in runs.items()},
    }
first = next(iter(modes))
for m in modes.values():
    m["speedup_vs_" + first] = round(modes[first]["wall_s"] / m["wall_s"], 3)
gpu = torch.cuda.get_device_name(0) if device == "cuda" else "cpu (plumbing check only)"
record = {"date": time.strftime("%Y-%m-%d %H:%M:%S"), "device": gpu,
          "gpus": torch.cuda.device_count() if device == "cuda" else 0,
          "torch": torch.__version__, "defconfig": "gpt2-tiny-shakespeare",
          "runs": len(runs), "max_iters": iters, "modes": modes}
out.write_text(json.dumps(record, indent=2) + "\n")
print(json.dumps({k: {"wall_s": v["wall_s"], "runs_at_once": v["runs_at_once"],
                      "speedup_vs_" + first: v["speedup_vs_" + first]}
                  for k, v in modes.items()}, indent=2))
print(f"bench_packing: wrote {out}")
EOF
