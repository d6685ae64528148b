"""What reads .config reads it as `make` does, and says what it kept."""

from __future__ import annotations

from pathlib import Path

import pytest

from lib.config.kconfig import ConfigError, load_strict
from lib.config.run_config import load_run_config, load_valid, write_outputs
from lib.paths import DEFCONFIGS
from lib.run import rundir


@pytest.fixture
def dot_config(tmp_path) -> Path:
    """The tiny Shakespeare defconfig (MAX_ITERS 2000, not the Kconfig default 300)."""
    path = tmp_path / ".config"
    write_outputs(load_valid(DEFCONFIGS / "gpt2-tiny-shakespeare"), path, tmp_path / "config.py")
    return path


def test_a_refused_override_names_the_value_the_configuration_keeps(dot_config):
    with pytest.raises(ConfigError) as err:
        load_run_config(["MAX_ITERS=0"], dot_config)
    assert "CONFIG_GPT2_MAX_ITERS=0 was not applied (it would be 2000): out of range" in str(
        err.value
    )


def test_runs_are_looked_for_through_the_checks_make_applies(dot_config, monkeypatch, tmp_path):
    monkeypatch.setattr(rundir, "DOT_CONFIG", dot_config)
    assert rundir.configured_results_root() == rundir.from_root("results")
    with dot_config.open("a") as f:
        f.write(f'CONFIG_RESULTS_DIR="{tmp_path / "elsewhere"}"\n')
    with pytest.raises(ConfigError) as make_says:
        load_strict(dot_config)  # what `make` says of the file
    with pytest.raises(ConfigError) as continue_says:
        rundir.configured_results_root()  # `make continue`, sample, export, results
    (problem,) = make_says.value.problems
    assert "contradicts CONFIG_RESULTS_DIR" in problem
    assert continue_says.value.problems[0] == problem
    assert 'SET="RESULTS_DIR=<dir>"' in continue_says.value.problems[1]
    # Named on the command line, the folder needs nothing of .config.
    there = [("RESULTS_DIR", str(tmp_path / "there"))]
    assert rundir.configured_results_root(there) == tmp_path / "there"


def test_a_problem_elsewhere_in_dot_config_does_not_hide_the_runs(dot_config, monkeypatch):
    monkeypatch.setattr(rundir, "DOT_CONFIG", dot_config)
    with dot_config.open("a") as f:
        f.write('CONFIG_RESULTS_DIR="moved"\nnot a line at all\nCONFIG_BATCH_SIZ=3\n')
    text = dot_config.read_text().replace('CONFIG_RESULTS_DIR="results"\n', "")
    dot_config.write_text(text)
    assert rundir.configured_results_root() == rundir.from_root("moved")
