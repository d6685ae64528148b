#!/usr/bin/env bash
# Create .venv and install the pinned requirements into it, once: with uv when it is on
# PATH (several times faster), else with pip. Called by make before the first target that
# needs Python. The stamp file
# records which requirements files were installed, so a second
# run is instant. The project itself goes in editable (-e): scripts import lib/,
# gpt2/ and hamt/ from the working tree without touching sys.path.
set -u
venv=${1:-.venv}
stamp="$venv/.installed"
python=${PYTHON:-python3}

wanted() { cat requirements.txt requirements-dev.txt requirements-lock.txt; }
if [ -x "$venv/bin/python" ] && [ -f "$stamp" ] && wanted | cmp -s - "$stamp"; then
	exit 0
fi
# A venv whose interpreter is gone (its base Python removed or upgraded; the link
# dangles) is made afresh: `python -m venv` leaves a dangling link in place, and the
# packages installed for the old interpreter are of no use to a new one.
fresh=()
if [ -f "$venv/pyvenv.cfg" ] && [ ! -x "$venv/bin/python" ]; then
	echo ">> $venv/bin/python is missing (was its Python removed or upgraded?): rebuilding $venv"
	fresh=(--clear)
fi
if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
	echo "error: kconfig-llm needs Python 3.11 or newer as '$python' (set PYTHON=/path/to/python3.11)." >&2
	exit 1
fi
# uv installs the requirements several times faster than pip (25 s against 235 s on
# a 2-core host). Without uv on PATH, pip fetches its one wheel into a temporary
# folder (a few seconds), removed on exit; if that fails, pip installs as before.
uv=uv
if ! command -v uv >/dev/null 2>&1; then
	uv=
	if [ "${KCONFIG_LLM_UV:-auto}" != no ] && tmp_uv=$(mktemp -d "${TMPDIR:-/tmp}/kconfig-llm-uv.XXXXXX"); then
		trap 'rm -rf "$tmp_uv"' EXIT
		if "$python" -m pip install --quiet --disable-pip-version-check --target "$tmp_uv" uv \
			>"$tmp_uv/pip.log" 2>&1 && [ -x "$tmp_uv/bin/uv" ]; then
			uv="$tmp_uv/bin/uv"
		else
			echo ">> uv is not on PATH and pip could not fetch it: installing with pip"
		fi
	fi
fi
if [ -n "$uv" ]; then tool=uv; else tool=pip; fi
# `make venv` timed on 2-core hosts, fresh .venv (docs/getting-started.md has the figures).
case $tool in
uv) took="under a minute with uv: 54 s on a busy 2-core host" ;;
*) took="about 4 minutes with pip: 235 s on a 2-core host; with uv under one" ;;
esac
echo ">> creating $venv and installing the requirements ($took; once)"
if [ ! -x "$venv/bin/python" ] && ! "$python" -m venv ${fresh[@]+"${fresh[@]}"} "$venv"; then
	echo "error: '$python -m venv $venv' failed. On Debian/Ubuntu install python3-venv, then rerun make." >&2
	exit 1
fi
log="$venv/install.log"
# setuptools (in the lock) builds the editable install without fetching anything.
# The editable install is of the checkout the venv lives in (a copy of the tree whose
# .venv links to this one must not rebind it to the copy).
home=$(dirname "$(readlink -f "$venv")")

# pip's settings (pip.conf, PIP_*), which uv does not read: the same wheel folders and
# indexes, so uv installs the torch build pip would (a local CPU wheel, for one).
pip_setting() { "$venv/bin/python" -m pip config get "global.$1" 2>/dev/null; }
uv_args=()
if [ "$tool" = uv ]; then
	for link in ${PIP_FIND_LINKS:-$(pip_setting find-links)}; do uv_args+=(--find-links "$link"); done
	# pip takes the best version from all its indexes; uv, by default, only from the
	# first that has the package (a local mirror may lack the pinned version).
	for url in ${PIP_EXTRA_INDEX_URL:-$(pip_setting extra-index-url)}; do
		uv_args+=(--extra-index-url "$url")
	done
	if [ ${#uv_args[@]} -gt 0 ]; then uv_args+=(--index-strategy unsafe-best-match); fi
	index=${PIP_INDEX_URL:-$(pip_setting index-url)}
	if [ -n "$index" ]; then uv_args+=(--index-url "$index"); fi
fi
# Python writes the .pyc of what it imports on first use, unless PYTHONDONTWRITEBYTECODE
# forbids it (CI machines, containers): then every process would compile torch anew
# (an import of torch and transformers took 12 s instead of 6), so uv compiles them all
# at install there, as pip always does (150 s instead of 51 s for the install).
compile=()
if [ -n "${PYTHONDONTWRITEBYTECODE:-}" ]; then compile=(--compile-bytecode); fi
with_uv() {
	"$uv" pip install ${compile[@]+"${compile[@]}"} --python "$venv/bin/python" \
		${uv_args[@]+"${uv_args[@]}"} "$@"
}
with_pip() { "$venv/bin/python" -m pip install --disable-pip-version-check "$@"; }
install() {
	"with_$1" -r requirements.txt -r requirements-dev.txt -c requirements-lock.txt \
		&& "with_$1" --no-deps --no-build-isolation -e "$home"
}
started=$(date +%s)
ok=1
install "$tool" >"$log" 2>&1 || ok=0
if [ "$ok" = 0 ] && [ "$tool" = uv ]; then
	mv "$log" "$log.uv"
	echo ">> uv could not install them (its output: $log.uv); installing with pip instead"
	tool=pip
	ok=1
	install pip >"$log" 2>&1 || ok=0
fi
if [ "$ok" = 0 ]; then
	echo "error: installing the requirements into $venv failed. The last lines of $log:" >&2
	grep -v "is ignored" "$log" | tail -n 15 >&2
	echo "Fix the cause (network, disk space, Python version), then rerun the same make command;" >&2
	echo "'make mrproper' removes $venv for a clean retry." >&2
	exit 1
fi
wanted >"$stamp"
torch=$("$venv/bin/python" -c 'import torch; print(torch.__version__)' 2>/dev/null || echo '?')
echo ">> $venv ready ($tool, $(($(date +%s) - started)) s; torch $torch)"
