"""Every variable typed after `make` is one the Makefile reads, or make stops; an empty
.config is filled with the defaults with a note."""

from __future__ import annotations

import re
import shlex

from lib.paths import ROOT
from tests.scripts.conftest import make

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("**/*.md"))]


def test_a_misspelt_variable_stops_make_with_the_override_suggestion():
    out = make(ROOT, "help", "LRR=1e-3")
    assert out.returncode == 2 and out.stdout == ""
    assert "LRR is not a variable make reads (did you mean LR?)" in out.stderr
    assert "`NAME=<value> make ...`" in out.stderr


def test_a_kconfig_symbol_typed_as_a_variable_points_to_set():
    out = make(ROOT, "help", "LEARNING_RATE=1e-3", "LERNING_RATE=1", "CONFIG_LR=2")
    assert out.returncode == 2
    assert (
        'LEARNING_RATE is a Kconfig symbol, not a make variable: SET="LEARNING_RATE=<value>"'
        in (out.stderr)
    )
    assert 'LERNING_RATE is not a variable make reads (did you mean SET="LEARNING_RATE=' in (
        out.stderr
    )
    assert "CONFIG_LR is not a variable make reads (did you mean LR?)" in out.stderr


def test_a_hostile_name_or_value_is_quoted_not_run(tmp_path):
    canary = tmp_path / "canary"
    out = make(ROOT, "help", f"X'$(touch {canary})=1", f"LRR=$(shell touch {canary})")
    assert out.returncode == 2 and "LRR is not a variable" in out.stderr
    assert not canary.exists()


def test_environment_and_program_variables_are_not_refused():
    # From the environment (plain or through -e) nothing is checked: only what is typed.
    assert make(ROOT, "help", env={"LRR": "1"}).returncode == 0
    assert make(ROOT, "-e", "help", env={"LRR": "1"}).returncode == 0
    typed = ["CUDA_VISIBLE_DEVICES=0", "HF_HUB_OFFLINE=1", "WANDB_MODE=offline", "TEST_JOBS=2"]
    assert make(ROOT, "help", *typed, "SHELL=/bin/sh", "V=1", "PY=x", "VENV=.venv").returncode == 0


def _documented_variables() -> dict[str, str]:
    """NAME -> the docs page of every NAME=value a documented make command types."""
    names: dict[str, str] = {}
    for page in DOCS:
        for line in page.read_text().splitlines():
            for m in re.finditer(r"(?:^|`|\$ |&& |; )\s*make ([^`]*)", line):
                try:
                    words = shlex.split(m.group(1).rstrip("\\ "))
                except ValueError:
                    words = m.group(1).split()
                for word in words:
                    if word in ("&&", ";", "|"):
                        break
                    if name := re.match(r"([A-Z][A-Z0-9_]*)=", word):
                        names.setdefault(name[1], page.name)
    return names


def test_every_variable_the_docs_type_after_make_is_accepted():
    names = _documented_variables()
    assert {"LR", "SET", "RUN", "FILE", "TUNE", "EXPORT_DIR"} <= set(names)
    # Documented as refused: RESUME (test_make_help.py checks its message), LRR (above).
    for refused in ("RESUME", "LRR"):
        names.pop(refused)
    out = make(ROOT, "help", *(f"{n}=1" for n in sorted(names)))
    assert out.returncode == 0, (out.stderr, names)


def test_an_empty_dot_config_is_filled_with_defaults_and_says_so(project):
    (project / ".config").write_text("# nothing set yet\n")
    out = make(project, "show")
    assert out.returncode == 0, out.stderr
    assert "note: .config held no settings, so it now holds every option at its Kconfig" in (
        out.stderr
    )
    assert "CONFIG_GPT2_MAX_ITERS=" in (project / ".config").read_text()
    again = make(project, "show")  # said once: the file now holds the defaults
    assert again.returncode == 0 and "note: .config" not in again.stderr
