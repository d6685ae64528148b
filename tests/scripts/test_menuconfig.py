"""menuconfig in a real terminal (tmux): edit a value, save, config.py follows;
a float that does not parse or is out of range is refused at entry and at save,
and the menu opens on an invalid .config so it can be fixed there."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.scripts.conftest import make

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")


def tmux(*args: str) -> str:
    return subprocess.run(
        ["tmux", "-L", "kconfig-llm-test", *args], capture_output=True, text=True, check=True
    ).stdout


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
    try:
        open_menu(project)
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
    assert "BATCH_SIZE=24," in (project / "config.py").read_text()


def keys(*names: str) -> None:
    tmux("send-keys", "-t", "mc", *names)


def type_text(text: str) -> None:
    tmux("send-keys", "-t", "mc", "-l", text)


def open_menu(project) -> None:
    tmux(
        "new-session",
        "-d",
        "-s",
        "mc",
        "-x",
        "120",
        "-y",
        "40",
        f"make -C {project} menuconfig; echo EXIT=$?; sleep 60",
    )
    wait_for("Training  --->")


def edit_learning_rate(text: str) -> None:
    """Jump to LEARNING_RATE, open its entry dialog, replace the text, press Enter."""
    keys("/")
    type_text("LEARNING_RATE")
    wait_for('"Peak learning rate"')
    keys("Enter")
    wait_for(") Peak learning rate")
    keys("Enter")
    wait_for("Range: 1e-08 to 10")
    keys("C-a", "C-k")  # start of line, kill to end
    type_text(text)
    keys("Enter")


def kill_tmux() -> None:
    subprocess.run(["tmux", "-L", "kconfig-llm-test", "kill-server"], capture_output=True)


def default_lr(project) -> str:
    """The embedded default's learning rate as its defconfig writes it."""
    text = (project / "defconfigs" / "gpt2-tiny-shakespeare").read_text()
    (lr,) = re.findall(r'^CONFIG_LEARNING_RATE="([^"]+)"$', text, re.M)
    return lr


def test_menuconfig_refuses_bad_floats_at_entry(project):
    assert make(project, "defconfig-gpt2-tiny-shakespeare").returncode == 0
    lr = default_lr(project)
    before = (project / ".config").read_bytes()
    open_menu(project)
    try:
        edit_learning_rate("abc")
        screen = wait_for("Error")
        assert 'CONFIG_LEARNING_RATE="abc" is not a number' in screen  # dialogs wrap:
        assert "allowed: a number from 1e-08" in screen  # short pieces fit any width
        keys("Enter", "C-a", "C-k")  # the entry dialog reopens with the refused text
        type_text("50")
        keys("Enter")
        screen = wait_for("out of range")
        assert 'CONFIG_LEARNING_RATE="50" is out of range' in screen
        keys("Enter", "Escape")  # give up: the value stays as it was
        wait_for(f"({lr}) Peak learning rate")
        keys("S")
        wait_for("Filename to save")
        keys("Enter")
        wait_for("Configuration saved")  # the same values (config.py rewrites the header)
        keys("Enter", "Q")
        wait_for("EXIT=0")
    finally:
        kill_tmux()
    assert (project / ".config").read_bytes() == before
    assert f"LEARNING_RATE={float(lr)!r}," in (project / "config.py").read_text()


def test_menuconfig_opens_on_invalid_config_and_saves_only_when_fixed(project):
    assert make(project, "defconfig-gpt2-tiny-shakespeare").returncode == 0
    config = project / ".config"
    config.write_text(
        config.read_text().replace(
            f'CONFIG_LEARNING_RATE="{default_lr(project)}"', 'CONFIG_LEARNING_RATE="abc"'
        )
    )
    invalid = config.read_bytes()
    assert make(project, "show").returncode != 0  # the rest of the project refuses it
    open_menu(project)
    try:
        screen = wait_for(".config is invalid")
        assert ".config:" in screen and 'CONFIG_LEARNING_RATE="abc" is not a number' in screen
        keys("Enter", "S")  # saving before fixing is refused; .config stays as it was
        wait_for("Filename to save")
        keys("Enter")
        screen = wait_for("Not saved")
        assert 'CONFIG_LEARNING_RATE="abc" is not a number' in screen
        assert config.read_bytes() == invalid
        keys("Enter", "Escape")  # dismiss, then leave the file-name dialog
        wait_for("[S] Save")
        edit_learning_rate("6e-4")
        wait_for("(6e-4) Peak learning rate")
        keys("S")
        wait_for("Filename to save")
        keys("Enter")
        wait_for("Configuration saved")
        keys("Enter", "Q")
        wait_for("EXIT=0")
    finally:
        kill_tmux()
    assert 'CONFIG_LEARNING_RATE="6e-4"' in config.read_text()
    assert "LEARNING_RATE=0.0006," in (project / "config.py").read_text()
    assert make(project, "show").returncode == 0


def test_menuconfig_search_names_the_symbol_a_misspelt_name_meant(project):
    assert make(project, "defconfig-gpt2-tiny-shakespeare").returncode == 0
    open_menu(project)
    try:
        keys("/")
        type_text("LERNING_RATE")
        wait_for("No matches. Did you mean LEARNING_RATE?")
        keys("C-a", "C-k")
        type_text("gpt2_compile")  # an old name: the symbol that holds it now
        wait_for("Did you mean COMPILE_MODEL?")
        keys("C-a", "C-k")
        type_text("LEARNING_RATE")  # the suggestion typed jumps as usual
        wait_for('"Peak learning rate"')
        keys("Enter")
        wait_for(") Peak learning rate")
        keys("Q")
        wait_for("EXIT=0")
    finally:
        kill_tmux()


def menu_processes(project) -> list[int]:
    """The menuconfig processes running in `project` (by their working directory)."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            cmdline = (proc / "cmdline").read_bytes()
            cwd = (proc / "cwd").resolve()
        except OSError:
            continue
        if b"menuconfig" in cmdline and b"kconfig.py" in cmdline and cwd == project.resolve():
            found.append(int(proc.name))
    return found


def test_menuconfig_exits_when_its_terminal_is_killed(project):
    assert make(project, "defconfig-gpt2-tiny-shakespeare").returncode == 0
    before = (project / ".config").read_text()
    open_menu(project)
    assert menu_processes(project), "menuconfig is not running"
    subprocess.run(["tmux", "-L", "kconfig-llm-test", "kill-server"], capture_output=True)
    deadline = time.time() + 10
    while menu_processes(project) and time.time() < deadline:
        time.sleep(0.2)
    left = menu_processes(project)
    for pid in left:  # never leave a spinning orphan behind, even when failing
        os.kill(pid, signal.SIGKILL)
    assert not left, "menuconfig kept running on a dead terminal"
    assert (project / ".config").read_text() == before
