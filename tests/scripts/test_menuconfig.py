"""menuconfig in a real terminal (tmux): edit a value, save, config.py follows."""
from __future__ import annotations

import shutil
import subprocess
import time

import pytest

from tests.scripts.conftest import make

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")


def tmux(*args: str) -> str:
    return subprocess.run(["tmux", "-L", "kconfig-llm-test", *args], capture_output=True,
                          text=True, check=True).stdout


def wait_for(text: str, timeout: float = 20.0) -> str:
    deadline = time.time() + timeout
    while time.time() < deadline:
        screen = tmux("capture-pane", "-p", "-t", "mc")
        if text in screen:
            return screen
        time.sleep(0.2)
    raise AssertionError(f"'{text}' never appeared; screen:\n{screen}")


def test_menuconfig_edit_and_save_regenerates_config_py(project):
    assert make(project, "defconfig-gpt2-tiny-shakespeare").returncode == 0
    tmux("new-session", "-d", "-s", "mc", "-x", "120", "-y", "40",
         f"make -C {project} menuconfig; echo EXIT=$?; sleep 60")
    try:
        wait_for("Training  --->")
        tmux("send-keys", "-t", "mc", "Down", "Down", "Enter")
        wait_for("Micro-batch size")
        tmux("send-keys", "-t", "mc", "Down", "Enter")  # past the context length
        wait_for("Range: 1-2048")
        tmux("send-keys", "-t", "mc", "BSpace", "BSpace", "2", "4", "Enter")
        wait_for("(24) Micro-batch size")
        tmux("send-keys", "-t", "mc", "S")
        wait_for(".config")
        tmux("send-keys", "-t", "mc", "Enter")
        wait_for("Configuration saved")
        tmux("send-keys", "-t", "mc", "Enter", "Q")
        wait_for("EXIT=0")
    finally:
        subprocess.run(["tmux", "-L", "kconfig-llm-test", "kill-server"], capture_output=True)
    assert "CONFIG_BATCH_SIZE=24" in (project / ".config").read_text()
    assert "BATCH_SIZE: int = 24" in (project / "config.py").read_text()
