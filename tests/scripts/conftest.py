"""A scratch copy of the project for tests that run make targets, and a stub checkout: the
Makefile alone with a recording interpreter, for tests that run every target at once."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import time
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


# Two validation batches an evaluation for a test's short training run through make: a
# run cut to a few dozen steps keeps its configuration's evaluations (SCALE_ITERS scales
# the interval with the run), 20 batches each, which would cost more than its training.
SHORT_EVAL = "TRAIN_EVAL_ITERS=2"


def with_set(words: list[str] | tuple[str, ...], *symbols: str) -> list[str]:
    """`words` with `symbols` added to their SET= (make keeps only the last one), or in
    a SET= of their own."""
    out = list(words)
    sets = [i for i, w in enumerate(out) if w.startswith("SET=")]
    if sets:
        out[sets[-1]] = " ".join([out[sets[-1]], *symbols])
    else:
        out.append("SET=" + " ".join(symbols))
    return out


@pytest.fixture
def project(tmp_path, monkeypatch, compiled_sources) -> Path:
    """The project's sources copied to tmp_path, sharing the real .venv.

    The .venv's editable install points at the real tree: the copy goes first on
    PYTHONPATH (inherited by every process a test starts) so its own sources run.
    """
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    for src in compiled_sources.iterdir():
        if src.is_dir():
            shutil.copytree(src, tmp_path / src.name)
        else:
            shutil.copy2(src, tmp_path / src.name)
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


class StubCheckout:
    """The Makefile in a scratch folder whose .venv/bin/python only records its calls.

    Every prerequisite is in place and up to date (the install stamp matching the
    requirements, .config, config.py, a schema newer than its Kconfig), so each target runs
    its own recipe alone and no real Python starts: one make run over every target takes
    well under a second. A call is recorded as its PYTHONPATH and its argv, NUL-separated.
    """

    def __init__(self, root: Path):
        self.root = root
        self.log = root.parent / "calls"
        for name in ("Makefile", "scripts/bootstrap.sh", "scripts/flaky_gate.sh", *REQUIREMENTS):
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, root / name)
        self.python = root / ".venv" / "bin" / "python"
        self.python.parent.mkdir(parents=True)
        self.write_recorder(self.python)
        stamp = "".join((ROOT / name).read_text() for name in REQUIREMENTS)
        (root / ".venv" / ".installed").write_text(stamp)
        for name in ("Kconfig", "lib/config/symbols.py", ".config", "config.py"):
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text("")
        # Oldest first: each file is newer than what it is made from, so nothing is rebuilt.
        start = time.time() - 100
        order = [*REQUIREMENTS, "Kconfig", "lib/config/symbols.py", ".config", "config.py"]
        for i, name in enumerate([*order, ".venv/.installed"]):
            os.utime(root / name, (start + i, start + i))

    def write_recorder(self, path: Path) -> None:
        path.write_text(
            "#!/bin/sh\n"
            f"""printf '%s\\0' "$#" "${{PYTHONPATH-}}" "$@" >>{shlex.quote(str(self.log))}\n"""
        )
        path.chmod(0o755)

    def targets(self) -> list[str]:
        """Every target `make help` lists (a defconfig's under one name), but clean and mrproper."""
        text = (self.root / "Makefile").read_text()
        phony = re.findall(r"^\.PHONY: (\S+)$", text, re.M)
        return [t for t in phony if t not in ("clean", "mrproper")] + ["defconfig-tiny"]

    def make(self, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
        self.log.unlink(missing_ok=True)
        return make(self.root, *args, env=env)

    def calls(self) -> list[tuple[str, list[str]]]:
        """(PYTHONPATH, argv) of each call since the last make, in order."""
        if not self.log.exists():
            return []
        fields = self.log.read_bytes().decode("utf-8", "surrogateescape").split("\0")
        calls, i = [], 0
        while i < len(fields) - 1:
            n = int(fields[i])
            calls.append((fields[i + 1], fields[i + 2 : i + 2 + n]))
            i += 2 + n
        return calls


REQUIREMENTS = ("requirements.txt", "requirements-dev.txt", "requirements-lock.txt")


@pytest.fixture
def stub_checkout(tmp_path) -> StubCheckout:
    root = tmp_path / "checkout"
    root.mkdir()
    return StubCheckout(root)
