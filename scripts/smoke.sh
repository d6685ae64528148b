#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The smoke matrix end to end, with the commands of the README's "Test matrix
# and results": defconfigs/cpu-smoke-matrix (every optimizer, pruning method
# and attention family, HAMT too, as tiny CPU runs), `make test-matrix YES=1`,
# `make results`. Exits non-zero unless summary.md lists every run of the
# matrix as completed. REUSE=n: a smoke test that linked earlier runs in would
# test nothing. The .config (and config.py) it replaces is put back at the end.
#
# Usage: scripts/smoke.sh [NAME=VALUE ...]   (extra overrides for test-matrix)
set -euo pipefail
cd "$(dirname "$0")/.."

saved=$(mktemp -d)
for f in .config config.py; do
	if [ -e "$f" ]; then cp -p "$f" "$saved/"; fi
done
restore() {
	for f in .config config.py; do
		rm -f "$f"
		if [ -e "$saved/$f" ]; then cp -p "$saved/$f" "$f"; fi
	done
	rm -rf "$saved"
}
trap restore EXIT

SECONDS=0
make defconfig-cpu-smoke-matrix
before=$(readlink -f results/latest || true)
trained=0
make test-matrix YES=1 REUSE=n "$@" || trained=$?
matrix=$(readlink -f results/latest || true)
if [ "$matrix" = "$before" ]; then
	echo "smoke matrix: make test-matrix started no matrix (exit $trained)" >&2
	exit 1
fi
make results  # also after a failed run: the summary names it, with its error

.venv/bin/python - "$matrix" <<'EOF'
"""Every run matrix.json planned has one row in summary.md, with status completed."""
import json
import sys
from pathlib import Path

folder = Path(sys.argv[1])
planned = json.loads((folder / "matrix.json").read_text())["runs"]
status: dict[str, list[str]] = {}
for line in (folder / "summary.md").read_text().splitlines():
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    if line.startswith("| ") and cells[0] in planned:
        status.setdefault(cells[0], []).append(cells[-1])
bad = [f"{run}: {', '.join(status.get(run, [])) or 'not in summary.md'}"
       for run in planned if status.get(run) != ["completed"]]
if bad:
    sys.exit(f"smoke matrix: {len(bad)} of {len(planned)} runs not completed "
             f"({folder}/summary.md):\n  " + "\n  ".join(bad))
print(f"smoke matrix: all {len(planned)} runs completed ({folder})")
EOF
echo "smoke matrix: ${SECONDS} s"
if [ "$trained" -ne 0 ]; then
	echo "smoke matrix: make test-matrix exited with $trained" >&2
	exit "$trained"
fi
