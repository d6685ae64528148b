"""DRY_RUN=1 checks RUN_NAME as a real run does: the same one-paragraph error."""

from __future__ import annotations

import subprocess
import sys

import pytest

from lib.config.kconfig import open_tree
from lib.config.run_config import write_outputs
from tests.scripts.conftest import project  # noqa: F401 (fixture)


def _train(project, *args):
    return subprocess.run(
        [sys.executable, "scripts/train.py", *args],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("name", ["../evil", "/tmp/abs", "a b"])
def test_dry_run_refuses_an_invalid_run_name_like_a_real_run(project, name):
    write_outputs(open_tree(), project / ".config", project / "config.py")
    dry = _train(project, "DRY_RUN=1", f"RUN_NAME={name}")
    assert dry.returncode == 2 and dry.stdout == "", dry.stdout[-500:]
    assert dry.stderr.startswith(f'error: CONFIG_RUN_NAME="{name}": allowed letters')
    assert "Traceback" not in dry.stderr and len(dry.stderr.strip().splitlines()) == 1
    assert not (project / "results").exists() and not (project.parent / "evil").exists()


@pytest.mark.slow  # the real run loads torch
def test_a_real_run_refuses_it_with_the_very_same_message(project):
    write_outputs(open_tree(), project / ".config", project / "config.py")
    dry = _train(project, "DRY_RUN=1", "RUN_NAME=../evil")
    real = _train(project, "RUN_NAME=../evil")
    assert real.returncode == 2 and (real.returncode, real.stderr) == (dry.returncode, dry.stderr)
    good = _train(project, "DRY_RUN=1", "RUN_NAME=fine-name_1.0")  # and a valid name passes
    assert good.returncode == 0 and "CONFIG_RUN_NAME" in good.stdout, good.stderr
    assert not (project / "results").exists() and not (project.parent / "evil").exists()
