#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Regenerate the documentation's pictures, docs/images/*.png, from real runs: a tiny
# 5-run matrix (gpt2-tiny-shakespeare-matrix, 40 steps each, characters; about 2
# minutes on 2 idle cores) trained in a scratch copy of this tree, so results/ and .config
# here are left alone. It writes
#   menuconfig.png   `make menuconfig` as the terminal shows it (tmux)
#   watch.png        `make watch` while the matrix trains
#   report.png       the top of `make report`'s index.html (headless Chromium)
#   val_loss.png     the validation-loss plot `make results` drew
# Needs tmux and Chromium (Debian: apt-get install tmux chromium).
#
# Usage: scripts/docs_images.sh [scratch folder]   (default: a new temporary folder)
#        DOCS_IMAGES_REF=HEAD scripts/docs_images.sh   (train a commit's tree instead of the working tree)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
images=$root/docs/images
scratch=${1:-$(mktemp -d)}
for tool in tmux chromium; do
	command -v "$tool" >/dev/null || { echo "error: $tool is needed (apt-get install $tool)" >&2; exit 1; }
done
make -s venv
mkdir -p "$images" "$scratch"
repo=$scratch/repo
echo ">> scratch copy in $repo"
rm -rf "$repo" && mkdir -p "$repo/results"
if [ -n "${DOCS_IMAGES_REF:-}" ]; then  # a commit's tree, when the working tree is mid-edit
	git archive "$DOCS_IMAGES_REF" | tar -xf - -C "$repo"
else
	tar --exclude=./.venv --exclude=./results --exclude=./data --exclude=./site --exclude=./.git \
		--exclude=./.whl --exclude=./.config --exclude=./config.py -cf - . | tar -xf - -C "$repo"
fi
ln -s "$root/.venv" "$repo/.venv"
cd "$repo"
# The copy's own sources run, not the tree the .venv's editable install points at.
export PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}"

shot() {  # shot <url> <png> <width> <height>
	chromium --headless --no-sandbox --disable-gpu --disable-background-networking \
		--hide-scrollbars --force-device-scale-factor=1 --window-size="$3,$4" \
		--screenshot="$2" "$1" >/dev/null 2>&1
}
terminal() {  # terminal <text file with ANSI colours> <png> <title>: render as a terminal window
	.venv/bin/python - "$1" "$3" >"$scratch/terminal.svg" <<'EOF'
import sys
from rich.console import Console
from rich.text import Text
text = Text.from_ansi(open(sys.argv[1], encoding="utf-8").read().rstrip("\n"))
width = max(len(line) for line in text.plain.splitlines())
console = Console(record=True, width=width, file=open("/dev/null", "w"), force_terminal=True)
console.print(text, soft_wrap=True)
print(console.export_svg(title=sys.argv[2]))
EOF
	size=$(.venv/bin/python -c "import re,sys; v=re.search(r'viewBox=\"0 0 ([\d.]+) ([\d.]+)\"', open(sys.argv[1]).read()); print(round(float(v[1])), round(float(v[2])))" "$scratch/terminal.svg")
	shot "file://$scratch/terminal.svg" "$2" ${size% *} ${size#* }
}

make -s defconfig-gpt2-tiny-shakespeare-matrix
echo ">> menuconfig.png"
tmux kill-session -t docs-menuconfig 2>/dev/null || true
tmux new-session -d -s docs-menuconfig -x 96 -y 30 "make menuconfig"
sleep 4
tmux send-keys -t docs-menuconfig Down Down Down Down Enter
sleep 1
tmux capture-pane -e -p -N -t docs-menuconfig >"$scratch/menuconfig.ansi"
tmux kill-session -t docs-menuconfig
terminal "$scratch/menuconfig.ansi" "$images/menuconfig.png" "make menuconfig"

echo ">> training the matrix (about 2 minutes on 2 idle cores)"
overrides=(MAX_ITERS=40 YES=1 REUSE=n
	SET="GPT2_EVAL_INTERVAL=10 GPT2_WARMUP_STEPS=5 PRUNING_WARMUP=5 PRUNING_RAMP_END=30 DATA_TOKENIZER_CHAR=y")
make -s prepare SET="DATA_TOKENIZER_CHAR=y" >/dev/null
make test-matrix "${overrides[@]}" >"$scratch/matrix.log" 2>&1 &
matrix=$!
# `make watch` once two runs are done and the third is under way.
for _ in $(seq 1800); do
	kill -0 "$matrix" 2>/dev/null || break
	done_runs=$(grep -c '"state": "completed"' results/latest/matrix.json 2>/dev/null || true)
	[ "${done_runs:-0}" -ge 2 ] && grep -q 'iter [1-3]0/40' results/latest/*/output.log 2>/dev/null \
		&& [ "$(grep -l 'iter [1-3]0/40' results/latest/*/output.log | wc -l)" -ge 3 ] && break
	sleep 1
done
sleep 3
make -s watch ONCE=1 >"$scratch/watch.txt"
wait "$matrix" || { echo "error: the matrix failed; its log: $scratch/matrix.log" >&2; tail -n 20 "$scratch/matrix.log" >&2; exit 1; }
terminal "$scratch/watch.txt" "$images/watch.png" "make watch"

echo ">> report.png, val_loss.png"
make -s results >/dev/null
make -s report >/dev/null
shot "file://$repo/results/latest/index.html" "$images/report.png" 1100 820
cp results/latest/val_loss.png "$images/val_loss.png"
ls -l "$images"
