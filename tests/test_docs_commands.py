"""The `make` commands the docs show work on the configuration they are shown with.

A page's fenced block is read top to bottom: `make defconfig-X` switches the
configuration for the lines after it (the default, gpt2-tiny-shakespeare, before any);
a command followed by an `error:` line is an example of a refusal and must be refused
with that first problem. The fast test loads every command's overrides as the scripts
do (the rules included: a tuning budget, a schedule that does not fit); the slow test
runs the default's commands with make in a scratch copy, cut short with SCALE_ITERS.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass

import pytest

from lib.config.kconfig import ConfigError
from lib.config.lengths import TIED
from lib.config.run_config import load_run_config, load_valid, write_outputs
from tests.scripts.conftest import SHORT_EVAL, make, with_set
from tests.test_docs import FENCE, PAGES, ROOT, make_commands, page_id

DEFAULT = "gpt2-tiny-shakespeare"
MAKEFILE = (ROOT / "Makefile").read_text()
OVERRIDE_VARS = set(
    re.search(r"^OVERRIDE_VARS := (.*?)\nOPTION_VARS", MAKEFILE, re.M | re.S)
    .group(1)
    .replace("\\\n", " ")
    .split()
)
# What a command needs from outside the tree (a downloaded model, a cluster, a GPU, the
# user's own folder): checked by its own tests, not here.
OUTSIDE = (
    "GPT2_INIT_PATH=data/hf/",
    "DATA_CUSTOM_PATH=data/notes/",
    "EXECUTOR=slurm",
    "DEVICE=cuda",
    "BACKUP_DIR=/mnt/",
    "my_lion:",  # docs/bring-your-own-method.md's files: tests/test_docs_own_method.py
    "my_score:",
)


@dataclass(frozen=True)
class Shown:
    page: str
    defconfig: str
    words: tuple[str, ...]
    error: str  # the first problem of an `error:` example after it, else ""

    @property
    def overrides(self) -> list[str]:
        return [w for w in self.words if w.partition("=")[0] in OVERRIDE_VARS]

    def __str__(self) -> str:
        return f"{self.page} ({self.defconfig}): make {' '.join(self.words)}"


def shown_commands() -> list[Shown]:
    out = []
    for page in PAGES:
        for block in FENCE.finditer(page.read_text()):
            lines = block.group(0).splitlines()[1:-1]
            defconfig = DEFAULT
            for i, line in enumerate(lines):
                following = [s.strip() for s in lines[i + 1 : i + 3]]
                error = ""
                if following and following[0].startswith("error:") and len(following) > 1:
                    error = following[1].removeprefix("- ")
                for words in make_commands(line.strip().removeprefix("$ ")):
                    target = next((w for w in words if "=" not in w), "")
                    if target.startswith("defconfig-"):
                        defconfig = target.removeprefix("defconfig-")
                        continue
                    if any(o in " ".join(words) for o in OUTSIDE):
                        continue
                    out.append(Shown(page_id(page), defconfig, tuple(words), error))
    return out


COMMANDS = shown_commands()


@pytest.fixture(scope="module")
def configs(tmp_path_factory):
    """Each defconfig the commands are shown with, loaded as `make defconfig-X` does."""
    root = tmp_path_factory.mktemp("defconfigs")
    paths = {}
    for name in sorted({c.defconfig for c in COMMANDS}):
        path = root / name / ".config"
        path.parent.mkdir()
        write_outputs(load_valid(ROOT / "defconfigs" / name), path, path.parent / "config.py")
        paths[name] = path
    return paths


def test_the_docs_show_commands_with_overrides_and_refusals():
    assert any(c.words[:1] == ("tune",) for c in COMMANDS)  # the fair-comparisons example
    assert any(c.error for c in COMMANDS)  # configuration.md's refusal example
    assert len([c for c in COMMANDS if c.overrides]) >= 10


def test_every_command_shown_loads_or_is_refused_as_shown(configs):
    wrong = []
    for c in COMMANDS:
        if not c.overrides:
            continue
        try:
            load_run_config(c.overrides, configs[c.defconfig])
        except ConfigError as err:
            if not c.error or not err.problems or err.problems[0] != c.error:
                wrong.append(f"{c}: {err.problems[0] if err.problems else err}")
        else:
            if c.error:
                wrong.append(f"{c}: loads, but the page shows it refused with {c.error}")
    assert not wrong, "\n".join(wrong)


# The default's commands a scratch copy runs in order (training first): the targets that
# train, tune or plan the default, then those that read its runs, all without a network.
RUNNABLE = ("", "all", "train", "tune", "test-matrix", "test-matrix-dry-run", "estimate")
AFTER = ("results", "report", "sample", "export")


# The targets whose commands train: the slow test gives them SHORT_EVAL. A run cut to 10
# steps evaluates after each one (its interval scales to 1), and 20 batches each would
# cost twenty times its training.
TRAINS = ("", "all", "train", "tune", "test-matrix")


def _cut_short(words: list[str], target: str) -> list[str]:
    """`words` cut to 10 steps, with SHORT_EVAL in its SET= when it trains: SCALE_ITERS=10,
    in place of a MAX_ITERS= above 10 (which would cut the run and not its warmup)."""
    out = [w for w in words if not (w.startswith("MAX_ITERS=") and int(w[10:]) > 10)]
    if not any(w.startswith(("MAX_ITERS=", "SCALE_ITERS=")) for w in out):
        out.append("SCALE_ITERS=10")
    return with_set(out, SHORT_EVAL) if target in TRAINS else out


def runnable() -> list[list[str]]:
    """The default's commands as the slow test runs them: cut to 10 steps with short
    evaluations (_cut_short; a tuning trial gets 2 steps), tuning with 2 trials,
    confirmations answered; the commands that read a run read results/latest."""
    shown = [c for c in COMMANDS if c.defconfig == DEFAULT and not c.error]
    out = []
    for group in (RUNNABLE, AFTER):
        for c in shown:
            words = [w for w in c.words if not w.startswith(("RUN=", "CHECKPOINT=", "EXPORT_DIR="))]
            target = next((w for w in words if "=" not in w), "")
            if target not in group:
                continue
            if group is RUNNABLE:
                if any(f"{n}=" in " ".join(words) for n in (*TIED, "MECHINT_KV")):
                    continue  # lengths of its own (an analysis after the run): loaded only
                words = _cut_short(words, target)
                words += [*(["YES=1"] if "YES=1" not in words else [])]
                words += ["TUNE_TRIALS=2"] if target == "tune" else []
            if words not in out:
                out.append(words)
    return out


# The slow test's three parts, each in its own scratch copy so that they run side by side:
# the matrix and estimate commands, the tuning command, and the rest (training, and the
# commands that read the trained run).
PARTS = {"matrix": ("test-matrix", "test-matrix-dry-run", "estimate"), "tune": ("tune",), "run": ()}


def part(words: list[str]) -> str:
    target = next((w for w in words if "=" not in w), "")
    return next((name for name, targets in PARTS.items() if target in targets), "run")


def test_the_slow_test_runs_the_defaults_training_and_tuning_commands():
    assert {part(w) for w in runnable()} == set(PARTS)  # no part is empty
    short = f"SET={SHORT_EVAL}"
    assert [w for w in runnable() if part(w) == "run"][0] == ["SCALE_ITERS=10", short, "YES=1"]
    commands = [" ".join(w) for w in runnable()]
    assert f"tune TUNE=LR WARMUP TUNE_TRIALS=8 YES=1 SCALE_ITERS=10 {short} TUNE_TRIALS=2" in (
        commands
    )
    assert f"SCALE_ITERS=10 {short} YES=1" in commands  # the README's `make`
    # a shown MAX_ITERS=100 runs as SCALE_ITERS=10; a SET= of its own gains SHORT_EVAL
    assert f"SET=WEIGHT_DECAY=0.05 {SHORT_EVAL} SCALE_ITERS=10 YES=1" in commands
    assert all(c.count("SET=") <= 1 for c in commands)
    assert all(
        "SCALE_ITERS=10" in c for c in commands if c.split(" ")[0] in ("tune", "test-matrix")
    )
    assert any(c.startswith("sample") for c in commands)


@pytest.mark.slow
@pytest.mark.parametrize("which", list(PARTS))
def test_the_defaults_commands_run_with_make_cut_short(tmp_path, monkeypatch, which):
    import shutil

    from tests.scripts.conftest import SOURCES

    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    for name in [*SOURCES, "sweeps"]:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
        elif src.exists():
            shutil.copy2(src, tmp_path / name)
    (tmp_path / ".venv").symlink_to(ROOT / ".venv")
    assert make(tmp_path, f"defconfig-{DEFAULT}").returncode == 0
    env = {k: v for k, v in os.environ.items() if not k.startswith("MAKE")}
    failed = []
    for words in [w for w in runnable() if part(w) == which]:  # the first prepares the data
        done = subprocess.run(
            ["make", "--no-print-directory", "-C", str(tmp_path), *words],
            capture_output=True,
            text=True,
            env=env,
            timeout=1800,
        )
        if done.returncode != 0:
            failed.append(f"make {' '.join(words)}: exit {done.returncode}\n{done.stderr[-600:]}")
    assert not failed, "\n\n".join(failed)
