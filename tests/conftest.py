"""Shared fixtures: a scratch copy of the configuration inputs."""
from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def write_config(tmp_path):
    """Write a .config-style file from lines and return its path."""
    def write(*lines: str, name: str = "test.config") -> Path:
        path = tmp_path / name
        path.write_text("\n".join(lines) + "\n")
        return path
    return write
