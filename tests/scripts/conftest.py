"""A scratch copy of the project for tests that run make targets."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCES = [
    "Makefile",
    "Kconfig",
    "requirements.txt",
    "requirements-dev.txt",
    "requirements-lock.txt",
    "pyproject.toml",
    "lib",
    "gpt2",
    "hamt",
    "scripts",
    "defconfigs",
    "baselines",
]


@pytest.fixture
def project(tmp_path, monkeypatch) -> Path:
    """The project's sources copied to tmp_path, sharing the real .venv.

    The .venv's editable install points at the real tree: the copy goes first on
    PYTHONPATH (inherited by every process a test starts) so its own sources run.
    """
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    for name in SOURCES:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
        elif src.exists():
            shutil.copy2(src, tmp_path / name)
    (tmp_path / ".venv").symlink_to(ROOT / ".venv")
    return tmp_path


def make(project: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("MAKE")}
    full_env.update(env or {})
    return subprocess.run(
        ["make", "--no-print-directory", "-C", str(project), *args],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=300,
    )
