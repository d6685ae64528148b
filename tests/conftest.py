"""Shared fixtures: a scratch copy of the configuration inputs; and an
environment the tests control.

Hugging Face, transformers, W&B, Trackio and torch read their settings from the
environment, several of them once at import (datasets.config,
huggingface_hub.constants). A cluster shell often sets some (HF_DATASETS_OFFLINE=1,
HF_HOME on shared storage, CUDA_VISIBLE_DEVICES), and a test must not pass or
fail by them. So they are cleared here, when this file is imported: pytest
imports it before any other conftest and any test module, hence before those
packages read their settings; subprocesses the tests start inherit the
cleaned os.environ. HF_HOME is pinned to an empty scratch folder so no test
reads or writes the user's cache. pytest_unconfigure puts everything back. A
test that needs one of these variables sets it with monkeypatch.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Prefixes and names of the variables the libraries the project uses read.
# "TORCH" covers TORCH_*, TORCHINDUCTOR_*, TORCHDYNAMO_* and TORCHELASTIC_*.
CLEARED_PREFIXES = (
    "HF_",
    "HUGGINGFACE_",
    "TRANSFORMERS_",
    "WANDB_",
    "TRACKIO_",
    "TORCH",
    "PYTORCH_",
)
CLEARED_NAMES = (
    "CUDA_VISIBLE_DEVICES",
    "HIP_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
    "TRUST_CHECKPOINT",
)  # ours: loads checkpoints the unsafe way


SCRATCH_PREFIX = "kconfig-llm-tests-hf-"


def _hermetic_environment() -> dict[str, str]:
    """Clear the variables above, pin HF_HOME; returns the environment before."""
    before = dict(os.environ)
    if Path(before.get("HF_HOME", "/")).name.startswith(SCRATCH_PREFIX):
        # Done already: this file imported a second time as tests.conftest
        # (`from tests.conftest import ROOT`), or a pytest that a test started.
        return before
    for name in before:
        if name.startswith(CLEARED_PREFIXES) or name in CLEARED_NAMES:
            del os.environ[name]
    os.environ["HF_HOME"] = tempfile.mkdtemp(prefix=SCRATCH_PREFIX)
    return before


_ENVIRONMENT_BEFORE = _hermetic_environment()
HF_HOME = os.environ["HF_HOME"]


def pytest_unconfigure(config: pytest.Config) -> None:
    shutil.rmtree(HF_HOME, ignore_errors=True)
    os.environ.clear()
    os.environ.update(_ENVIRONMENT_BEFORE)


@pytest.fixture
def write_config(tmp_path):
    """Write a .config-style file from lines and return its path."""

    def write(*lines: str, name: str = "test.config") -> Path:
        path = tmp_path / name
        path.write_text("\n".join(lines) + "\n")
        return path

    return write
