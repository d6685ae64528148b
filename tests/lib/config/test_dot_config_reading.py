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
    """The tiny Shakespeare defconfig (its own MAX_ITERS, not the Kconfig default 300)."""
    path = tmp_path / ".config"
    write_outputs(load_valid(DEFCONFIGS / "gpt2-tiny-shakespeare"), path, tmp_path / "config.py")
    return path


def test_a_refused_override_names_the_value_the_configuration_keeps(dot_config):
    with pytest.raises(ConfigError) as err:
        load_run_config(["MAX_ITERS=0"], dot_config)
    kept = load_run_config([], dot_config).GPT2_MAX_ITERS
    assert kept != 300  # the defconfig's, which the Kconfig default would hide
    assert f"CONFIG_GPT2_MAX_ITERS=0 was not applied (it would be {kept}): out of range" in str(
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
    with dot_config.open("ab") as f:  # a byte `make` refuses, on another line
        f.write(b'CONFIG_RUN_NAME="\xe9"\n# caf\xe9\n')
    with pytest.raises(ConfigError, match="is not UTF-8 text"):
        load_strict(dot_config)
    assert rundir.configured_results_root() == rundir.from_root("moved")


def _results_line(dot_config: Path, line: bytes) -> None:
    text = dot_config.read_bytes()
    assert b'CONFIG_RESULTS_DIR="results"\n' in text
    dot_config.write_bytes(text.replace(b'CONFIG_RESULTS_DIR="results"\n', line))


@pytest.mark.parametrize(
    "line",
    [
        b"CONFIG_RESULTS_DIR=/x\n",  # unquoted: kconfiglib drops it, the default would be used
        b'CONFIG_RESULTS_DIR="\xe9t\xe9"\n',  # not UTF-8: a garbled folder name
        b'CONFIG_RESULTS_DIR="a"\nCONFIG_RESULTS_DIR="b"\n',  # kconfig keeps the last
        b'CONFIG_RESULTS_DIR="\xe9"\nCONFIG_RESULTS_DIR="b"\n',
    ],
    ids=["unquoted", "not-utf8", "twice", "not-utf8-twice"],
)
def test_a_results_dir_line_make_refuses_is_refused_with_makes_words(dot_config, monkeypatch, line):
    monkeypatch.setattr(rundir, "DOT_CONFIG", dot_config)
    _results_line(dot_config, line)
    with pytest.raises(ConfigError) as make_says:
        load_strict(dot_config)
    with pytest.raises(ConfigError) as continue_says:
        rundir.configured_results_root()
    assert continue_says.value.problems[:-1] == make_says.value.problems
    assert continue_says.value.problems[-1].endswith('name the folder with SET="RESULTS_DIR=<dir>"')
    with pytest.raises(ConfigError) as results_says:  # `make results` names it with RESULTS=
        rundir.configured_results_root(instead="RESULTS=<dir>")
    assert results_says.value.problems[-1].endswith("name the folder with RESULTS=<dir>")
    # a folder named on the command line needs nothing of .config, and the advice
    # inside another message names the run's folder instead of raising
    assert rundir.configured_results_root([("RESULTS_DIR", "/r")]) == Path("/r")
    run = dot_config.parent / "run"
    run.mkdir()
    assert rundir.resume_command(run) == f"make continue RUN={run.resolve()}"


def test_the_last_word_of_an_unbroken_file_is_the_folder(dot_config, monkeypatch):
    monkeypatch.setattr(rundir, "DOT_CONFIG", dot_config)
    _results_line(dot_config, b'CONFIG_RESULTS_DIR="a\\"b"\nnot a line\n')
    assert rundir.configured_results_root() == rundir.from_root('a"b')
