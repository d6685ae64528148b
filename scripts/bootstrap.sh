#!/usr/bin/env bash
# Create .venv and install the pinned requirements into it, once.
# Called by make before the first target that needs Python. The stamp file
# records which requirements files were installed, so a second
# run is instant. The project itself goes in editable (-e): scripts import lib/,
# gpt2/ and hamt/ from the working tree without touching sys.path.
set -u
venv=${1:-.venv}
stamp="$venv/.installed"
python=${PYTHON:-python3}

wanted() { cat requirements.txt requirements-dev.txt requirements-lock.txt; }
if [ -f "$stamp" ] && wanted | cmp -s - "$stamp"; then
	exit 0
fi
if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
	echo "error: kconfig-llm needs Python 3.11 or newer as '$python' (set PYTHON=/path/to/python3.11)." >&2
	exit 1
fi
echo ">> creating $venv and installing the requirements (about a minute; once)"
if [ ! -x "$venv/bin/python" ] && ! "$python" -m venv "$venv"; then
	echo "error: '$python -m venv $venv' failed. On Debian/Ubuntu install python3-venv, then rerun make." >&2
	exit 1
fi
log="$venv/install.log"
# setuptools (in the lock) builds the editable install without fetching anything.
# The editable install is of the checkout the venv lives in (a copy of the tree whose
# .venv links to this one must not rebind it to the copy).
home=$(dirname "$(readlink -f "$venv")")
if ! { "$venv/bin/python" -m pip install --disable-pip-version-check -r requirements.txt \
	-r requirements-dev.txt -c requirements-lock.txt \
	&& "$venv/bin/python" -m pip install --disable-pip-version-check --no-deps \
	--no-build-isolation -e "$home"; } >"$log" 2>&1; then
	echo "error: installing the requirements into $venv failed. The last lines of $log:" >&2
	grep -v "is ignored" "$log" | tail -n 15 >&2
	echo "Fix the cause (network, disk space, Python version), then rerun the same make command;" >&2
	echo "'make mrproper' removes $venv for a clean retry." >&2
	exit 1
fi
wanted >"$stamp"
echo ">> $venv ready"
