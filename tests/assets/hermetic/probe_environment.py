"""Run by tests/test_hermetic.py in a pytest started with a hostile shell
(HOSTILE there): checks that nothing of it reached the tests, the libraries'
import-time settings or a subprocess. Not collected by the suite itself."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

HOSTILE = json.loads(os.environ.get("KCONFIG_LLM_HOSTILE_SHELL", "{}"))


def kept(environ) -> dict[str, str]:
    """The hostile settings still in force."""
    return {name: value for name, value in HOSTILE.items() if environ.get(name) == value}


def test_the_shell_settings_reach_no_test_and_no_subprocess():
    assert HOSTILE and kept(os.environ) == {}
    assert Path(os.environ["HF_HOME"]).name.startswith("kconfig-llm-tests-hf-")
    show = "import json, os; print(json.dumps(dict(os.environ)))"
    shown = subprocess.run([sys.executable, "-c", show], capture_output=True, text=True, check=True)
    assert kept(json.loads(shown.stdout)) == {}


def test_the_libraries_read_the_cleared_environment_at_import():
    import datasets.config
    import huggingface_hub.constants

    from lib.data.sources import offline_variables

    home = os.environ["HF_HOME"]
    assert offline_variables() == []
    assert huggingface_hub.constants.HF_HUB_OFFLINE is False
    assert datasets.config.HF_DATASETS_OFFLINE is False
    assert str(datasets.config.HF_DATASETS_CACHE).startswith(home)
    assert huggingface_hub.constants.HF_HUB_CACHE.startswith(home)
