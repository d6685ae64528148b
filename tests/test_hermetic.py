"""tests/conftest.py's environment: what the user's shell sets for Hugging Face,
W&B and torch reaches neither the tests, nor the libraries' import-time
settings, nor the subprocesses the tests start."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.conftest import ROOT, _hermetic_environment

# What a cluster shell may well have; every one would change some test's outcome.
HOSTILE = {
    "HF_DATASETS_OFFLINE": "1",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_HOME": "/nonexistent/hf",
    "HF_DATASETS_CACHE": "/nonexistent/datasets",
    "HUGGINGFACE_HUB_CACHE": "/nonexistent/hub",
    "WANDB_MODE": "online",
    "WANDB_API_KEY": "x",
    "CUDA_VISIBLE_DEVICES": "7",
    "TORCH_HOME": "/nonexistent/torch",
    "TORCHINDUCTOR_CACHE_DIR": "/nonexistent/inductor",
}


def test_a_hostile_shell_reaches_no_test():
    probe = ROOT / "tests" / "assets" / "hermetic" / "probe_environment.py"
    env = {**os.environ, **HOSTILE, "KCONFIG_LLM_HOSTILE_SHELL": json.dumps(HOSTILE)}
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(probe)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0 and "2 passed" in out.stdout, out.stdout[-3000:] + out.stderr[-2000:]


def test_a_second_import_of_the_conftest_changes_nothing():
    # pytest imported it as `conftest`; `from tests.conftest import` above did once more
    before = dict(os.environ)
    _hermetic_environment()
    assert dict(os.environ) == before
    assert sys.modules["tests.conftest"].HF_HOME == os.environ["HF_HOME"]
