#!/bin/sh
# Load every GPT-2 defconfig of a knlp checkout here and compare, value by
# value, with what knlp's own Kconfig tree resolves (lib/knlpcheck/check.py).
# Usage: scripts/check_knlp.sh <knlp checkout> [--table]
set -e
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
exec "$PY" -c 'from lib.cli import run_script; from lib.knlpcheck.check import main; run_script(main)' "$@"
