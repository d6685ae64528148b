"""config.py and lib/config/symbols.py: the typed configuration scripts read.

symbols.py must be what the Kconfig files generate today; config.py is read
instead of .config when it was made from exactly that .config, and a .config
edited by hand since is read through the strict checks and brings config.py
up to date; a RunConfig never changes, a new value is built instead; mypy
catches a misspelt symbol.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import typing

import pytest

from lib.config import run_config
from lib.config.generate import render_symbols
from lib.config.kconfig import ConfigError, open_tree
from lib.config.run_config import RunConfig, load_run_config, with_batch_plan, write_outputs
from lib.config.symbols import Symbols
from lib.paths import ROOT, SYMBOLS_PY


def test_symbols_py_is_what_the_kconfig_files_generate():
    assert SYMBOLS_PY.read_text() == render_symbols(open_tree()), (
        "lib/config/symbols.py is out of date: run `make schema`"
    )


def test_fields_carry_type_optionality_and_help():
    hints = typing.get_type_hints(Symbols)
    assert hints["BATCH_SIZE"] is int  # nothing can hide it
    assert hints["LEARNING_RATE"] is float  # a string symbol with "Allowed X to Y"
    assert hints["GPT2_N_EMBD"] == int | None  # hidden unless GPT-2 with a custom size
    assert typing.get_args(hints["DEVICE"]) == ("auto", "cuda", "cpu", "mps")
    text = SYMBOLS_PY.read_text()
    field = text[text.index("    LEARNING_RATE: float") :]
    help_line = open_tree().syms["LEARNING_RATE"].nodes[0].help.strip().splitlines()[0].strip()
    assert help_line in field[: field.index('"""\n', field.index('"""') + 3)]


def test_a_run_config_is_frozen_and_changes_by_new_values(dot_config):
    run = load_run_config([], dot_config)
    with pytest.raises(dataclasses.FrozenInstanceError):
        run.BATCH_SIZE = 2  # type: ignore[misc]
    planned = with_batch_plan(run, 3, 4)
    assert (planned.BATCH_SIZE, planned.GPT2_GRADIENT_ACCUMULATION) == (3, 4)
    assert (run.BATCH_SIZE, run.GPT2_GRADIENT_ACCUMULATION) == (12, 1)
    assert planned.values["BATCH_SIZE"] == 3 and run.values["BATCH_SIZE"] == 12


def test_values_from_a_newer_kconfig_name_make_schema():
    values = load_run_config([], ROOT / "defconfigs" / "gpt2-tiny-shakespeare").values
    with pytest.raises(ConfigError, match=r"unknown: NEW_SYMBOL; missing: -\): run `make schema`"):
        RunConfig.from_values({**values, "NEW_SYMBOL": 1})


@pytest.fixture
def repo_paths(tmp_path, monkeypatch):
    """.config and config.py in tmp_path, as if they were the project's."""
    config, config_py = tmp_path / ".config", tmp_path / "config.py"
    monkeypatch.setattr(run_config, "CONFIG", config)
    monkeypatch.setattr(run_config, "CONFIG_PY", config_py)
    write_outputs(open_tree(), config, config_py)
    return config, config_py


def test_a_current_config_py_is_read_without_kconfig(repo_paths, monkeypatch):
    config, _ = repo_paths
    strict = load_run_config(["DRY_RUN=0"], config)  # the flag forces the strict path

    def refuse(path):
        raise AssertionError("config.py is current: .config must not be parsed again")

    monkeypatch.setattr(run_config, "load_checked", refuse)
    fast = load_run_config([], config)
    assert fast.values == strict.values and fast.flags == strict.flags
    assert fast.config_text == strict.config_text


def test_a_hand_edited_config_is_checked_and_brings_config_py_up_to_date(repo_paths):
    config, config_py = repo_paths
    config.write_text(config.read_text().replace("CONFIG_BATCH_SIZE=12", "CONFIG_BATCH_SIZE=16"))
    assert load_run_config([], config).BATCH_SIZE == 16
    assert "BATCH_SIZE=16," in config_py.read_text()
    config.write_text(config.read_text().replace("CONFIG_BATCH_SIZE=16", "CONFIG_BATCH_SIZE=0"))
    with pytest.raises(ConfigError, match="BATCH_SIZE"):
        load_run_config([], config)
    assert "BATCH_SIZE=16," in config_py.read_text()  # an invalid .config leaves it alone


def test_mypy_catches_a_misspelt_symbol(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text(
        "from lib.config.run_config import RunConfig\n\n"
        "def micro_batch(run: RunConfig) -> int:\n"
        "    return run.BATCH_SIZ\n\n"
        "def width(run: RunConfig) -> int:\n"
        "    return run.GPT2_N_EMBD\n"
    )
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--no-incremental",
            "--follow-imports=silent",
            "--ignore-missing-imports",
            str(probe),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert '"RunConfig" has no attribute "BATCH_SIZ"' in out.stdout
    assert 'Incompatible return value type (got "int | None", expected "int")' in out.stdout
    assert "Found 2 errors" in out.stdout
