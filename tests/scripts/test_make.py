"""The make targets a user types, run for real in a scratch copy."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from lib.config.kconfig import load_strict
from lib.config.run_config import load_valid, write_outputs
from lib.model.registry import FAMILY_PACKAGES
from tests.scripts.conftest import ROOT, make

DEFCONFIGS = sorted(p.name for p in (ROOT / "defconfigs").iterdir())


def load_config_py(project: Path) -> dict:
    namespace: dict = {}
    exec((project / "config.py").read_text(), namespace)
    return namespace["CONFIG"].values


@pytest.mark.parametrize("name", DEFCONFIGS)
def test_defconfig_loads_and_savedefconfig_round_trips(tmp_path, name):
    """Every defconfig, in-process through the functions `make defconfig-<name>` and
    `make savedefconfig` call (scripts/kconfig.py); the make targets themselves
    once, below."""
    config, config_py, minimal = tmp_path / ".config", tmp_path / "config.py", tmp_path / "min"
    write_outputs(load_valid(ROOT / "defconfigs" / name), config, config_py)
    first = config.read_text()
    assert load_config_py(tmp_path)["MODEL"] in FAMILY_PACKAGES
    load_strict(config).write_min_config(str(minimal))
    write_outputs(load_valid(minimal), config, config_py)
    assert config.read_text() == first


def test_make_defconfig_and_savedefconfig_round_trip(project):
    name = "gpt2-tiny-shakespeare"
    out = make(project, f"defconfig-{name}")
    assert out.returncode == 0, out.stderr
    first = (project / ".config").read_text()
    assert load_config_py(project)["MODEL"] in FAMILY_PACKAGES
    assert make(project, "savedefconfig").returncode == 0
    (project / "defconfigs" / "roundtrip").write_text((project / "defconfig").read_text())
    assert make(project, "defconfig-roundtrip").returncode == 0
    assert (project / ".config").read_text() == first


def test_defconfig_list_comes_from_the_folder(project):
    (project / "defconfigs" / "my-experiment").write_text("# My own experiment\n")
    out = make(project, "list-defconfigs")
    assert "defconfig-my-experiment" in out.stdout and "My own experiment" in out.stdout
    assert make(project, "defconfig-my-experiment").returncode == 0


def test_make_without_config_says_where_to_start(project):
    out = make(project)
    assert out.returncode != 0
    assert "make defconfig-gpt2-tiny-shakespeare" in out.stdout
    for name in DEFCONFIGS:
        assert f"defconfig-{name}" in out.stdout


def test_failed_defconfig_writes_nothing(project):
    assert make(project, "defconfig-gpt2-tiny-shakespeare").returncode == 0
    before = {f: (project / f).read_text() for f in (".config", "config.py")}
    (project / "defconfigs" / "bad").write_text(
        "# bad\nCONFIG_BATCH_SIZE=16\nCONFIG_BATCH_SIZE=4096\n"
    )
    out = make(project, "defconfig-bad")
    assert out.returncode != 0
    assert "defconfigs/bad:3: CONFIG_BATCH_SIZE=4096" in out.stderr
    assert "allowed: 1 to 2048" in out.stderr
    assert {f: (project / f).read_text() for f in before} == before


def test_config_py_is_regenerated_when_config_changes(project):
    assert make(project, "defconfig-gpt2-tiny-shakespeare").returncode == 0
    config = project / ".config"
    config.write_text(config.read_text().replace("CONFIG_BATCH_SIZE=12", "CONFIG_BATCH_SIZE=16"))
    future = time.time() + 5
    os.utime(config, (future, future))
    assert make(project, "show").returncode == 0
    assert load_config_py(project)["BATCH_SIZE"] == 16


def test_command_line_overrides_are_validated_and_not_saved(project):
    assert make(project, "defconfig-gpt2-tiny-shakespeare").returncode == 0
    before = (project / ".config").read_text()
    out = make(
        project, "show", "MAX_ITERS=5", "DEVICE=cpu", "SET=LEARNING_RATE=3e-4 GPT2_WARMUP_STEPS=1"
    )
    assert out.returncode == 0, out.stderr
    assert "CONFIG_GPT2_MAX_ITERS = 5" in out.stdout and "CONFIG_DEVICE = 'cpu'" in out.stdout
    assert "overrides: MAX_ITERS=5 DEVICE=cpu" in out.stdout
    bad = make(project, "show", "BATCH_SIZE=0")
    assert bad.returncode != 0 and "allowed: 1 to 2048" in bad.stderr
    assert (project / ".config").read_text() == before


def test_environment_variables_are_not_taken_as_overrides(project):
    assert make(project, "defconfig-gpt2-tiny-shakespeare").returncode == 0
    out = make(project, "show", env={"TIME": "%e seconds", "MAX_ITERS": "3"})
    assert out.returncode == 0, out.stderr
    (iters,) = [
        line.split("=")[1]
        for line in (project / "defconfigs" / "gpt2-tiny-shakespeare").read_text().splitlines()
        if line.startswith("CONFIG_GPT2_MAX_ITERS=")
    ]
    assert iters != "3" and f"CONFIG_GPT2_MAX_ITERS = {iters}" in out.stdout  # not the env's 3


def test_clean_keeps_results_and_mrproper_removes_config(project):
    assert make(project, "defconfig-gpt2-tiny-shakespeare").returncode == 0
    (project / "results" / "run1").mkdir(parents=True)
    assert make(project, "clean").returncode == 0
    assert (project / "results" / "run1").is_dir() and (project / ".config").exists()
    (project / ".venv").unlink()  # the shared venv is a symlink: keep the real one
    (project / ".venv").mkdir()
    assert make(project, "mrproper").returncode == 0
    for name in (".config", "config.py", ".venv"):
        assert not (project / name).exists()
    assert (project / "results" / "run1").is_dir()


def test_bootstrap_skips_when_installed(project):
    skip = subprocess.run(
        ["bash", "scripts/bootstrap.sh", ".venv"], cwd=project, capture_output=True, text=True
    )
    assert skip.returncode == 0 and skip.stdout == ""


@pytest.mark.slow  # makes a new environment and runs an installer in it
def test_bootstrap_explains_a_failed_install(project, tmp_path):
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "requirements.txt").write_text("this is not a requirement!!\n")
    fail = subprocess.run(
        ["bash", str(project / "scripts/bootstrap.sh"), ".venv"],
        cwd=broken,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert fail.returncode == 1
    assert "installing the requirements into .venv failed" in fail.stderr
    assert "rerun the same make command" in fail.stderr
    assert not (broken / ".venv" / ".installed").exists()
