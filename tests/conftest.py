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

import compileall
import gc
import os
import shutil
import sys
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

# As every script gets through lib/cli.py: every package's rules and the
# trainer's analyses, registered before any test checks a configuration.
import lib.rules  # noqa: E402, F401

HF_HOME = os.environ["HF_HOME"]


def _share_the_cores() -> None:
    """One xdist worker per core gets that core's share of threads (at least 1).

    torch would start as many OpenMP threads as cores in every worker, and
    workers x threads > cores makes OpenMP's spinning threads wait on each
    other: a 40-step training measured 14 s alone on one thread and 175 s with
    two threads beside a busy second core. Set before torch loads (and so
    inherited by the processes tests start); TEST_THREADS or the user's own
    OMP_NUM_THREADS win.
    """
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    wanted = os.environ.get("TEST_THREADS") or str(max(1, (os.cpu_count() or 1) // workers))
    if workers > 1 or os.environ.get("TEST_THREADS"):
        os.environ.setdefault("OMP_NUM_THREADS", wanted)
        os.environ.setdefault("MKL_NUM_THREADS", wanted)


_share_the_cores()


@pytest.hookimpl(wrapper=True)
def pytest_collection(session: pytest.Session):
    """Collect with a lazier garbage collector, then put its thresholds back and
    from then on freeze the survivors of each full collection (_freeze_survivors).

    Every xdist worker imports and assertion-rewrites all ~220 test modules (no
    cached .pyc under PYTHONDONTWRITEBYTECODE); the rewriting allocates AST nodes
    by the million, and at the default thresholds that set off thousands of
    young and ~17 full collections, each full one walking torch's objects: some
    6 s of a worker's ~25 s collection. No test runs in between, so none sees
    the change.
    """
    thresholds = gc.get_threshold()
    gc.set_threshold(100_000, 50, 1000)
    try:
        return (yield)
    finally:
        gc.set_threshold(*thresholds)
        gc.callbacks.append(_freeze_survivors)
        gc.collect()  # and freeze the modules and fixtures it leaves


def _freeze_survivors(phase: str, info: dict) -> None:
    """After each full collection, freeze what survived it.

    A full collection walks every object the process holds: torch's, then
    transformers', lm-eval's and the other libraries the tests import as they go,
    well over a million objects, each time the young ones pile up. Over the fast
    suite that cost each worker a quarter of its time (26 of 100 s on tests/lib,
    2-core Xeon). Frozen objects are skipped; a frozen cycle that dies later is
    not freed, which a test process, about to exit, does not miss.
    """
    if phase == "stop" and info["generation"] == 2:
        gc.freeze()


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


# ------------------------------------------------------------ stochastic tests
# A test whose verdict depends on random initialisation and float rounding (it
# trains for more than a few steps, or holds a learned quantity to a threshold)
# is marked `stochastic` and draws its seeds from the `seed` fixture. `make test`
# runs it at seed 0 with the host's threads and CPU kernels; `make test-flaky`
# runs it again under other seeds (TEST_SEED), thread counts (TEST_THREADS) and
# CPU kernel sets (ATEN_CPU_CAPABILITY, ONEDNN_MAX_CPU_ISA, MKL_ENABLE_INSTRUCTIONS), which is how a
# threshold measured on one host is checked against the rounding of another.
# docs/development.md says how such a threshold is chosen.

GATE_VARIABLES = (
    "TEST_SEED",
    "TEST_THREADS",
    "ATEN_CPU_CAPABILITY",
    "ONEDNN_MAX_CPU_ISA",
    "MKL_ENABLE_INSTRUCTIONS",
)


def pytest_configure(config: pytest.Config) -> None:
    threads = os.environ.get("TEST_THREADS")
    if threads:
        import torch

        torch.set_num_threads(int(threads))
    elif "torch" in sys.modules and os.environ.get("OMP_NUM_THREADS"):
        # a plugin loaded torch before _share_the_cores() set the variable
        sys.modules["torch"].set_num_threads(int(os.environ["OMP_NUM_THREADS"]))


# Markers whose suites collect only the files that name them (`make test-slow`, `make
# test-engines`, scripts/flaky_gate.sh), found by the text mark.<marker>.
FOUND_BY_TEXT = ("slow", "engine", "stochastic")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A test marked slow, engine or stochastic must be in a file that says
    `mark.<marker>`: the suites that run them find their files by that text instead of
    collecting every test module, and would leave such a test out."""
    texts: dict[Path, str] = {}
    hidden = sorted(
        f"{item.path} ({name})"
        for item in items
        for name in FOUND_BY_TEXT
        if item.get_closest_marker(name)
        and f"mark.{name}" not in texts.setdefault(item.path, item.path.read_text())
    )
    if hidden:
        raise pytest.UsageError(
            f"{', '.join(sorted(set(hidden)))}: marked without the text `mark.<marker>` "
            "(e.g. @pytest.mark.slow or pytestmark = pytest.mark.slow): `make test-slow`, "
            "`make test-engines` and `make test-flaky` find their files by it and would "
            "leave these tests out"
        )


@pytest.fixture
def seed() -> int:
    """The base seed of a stochastic test: 0 unless TEST_SEED says otherwise."""
    return int(os.environ.get("TEST_SEED", "0"))


def reproduce_line(nodeid: str) -> str:
    """The command that reruns one test under the gate's seed, threads and kernels."""
    given = " ".join(
        f"{name}={os.environ[name]}" for name in GATE_VARIABLES if os.environ.get(name)
    )
    return f"{given} .venv/bin/pytest -p no:randomly -n 0 '{nodeid}'".strip()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = yield
    if report.failed and item.get_closest_marker("stochastic"):
        report.sections.append(
            ("reproduce (seed, threads, CPU kernels)", reproduce_line(item.nodeid))
        )
    return report


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    """After a failure, the line that replays the same random order."""
    order_seed = getattr(config.option, "randomly_seed", None)
    if exitstatus == pytest.ExitCode.TESTS_FAILED and order_seed is not None:
        terminalreporter.write_line(
            f"The tests ran in random order {order_seed}: replay it with "
            f"`make test TEST_ORDER={order_seed}` (or pytest -p randomly --randomly-seed={order_seed})."
        )
        for report in terminalreporter.stats.get("failed", []):
            for title, text in report.sections:
                if title.startswith("reproduce"):
                    terminalreporter.write_line(f"{report.nodeid}: {text}")


@pytest.fixture(scope="session")
def compiled_sources(tmp_path_factory) -> Path:
    """The project's sources copied once per test process, with their bytecode, for
    the `project` fixture (tests/scripts/conftest.py) to copy.

    Where PYTHONDONTWRITEBYTECODE is set (common on shared hosts), every process a
    test starts in a fresh copy would compile the library anew, some 0.4 s of CPU
    for a training process. A .pyc holds its source's mtime and size, which copy2
    keeps, so each copy made from this one starts with valid bytecode; a source a
    test edits is compiled from its text again, as Python does anywhere.
    """
    from tests.scripts.conftest import SOURCES

    root = tmp_path_factory.mktemp("sources")
    for name in SOURCES:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, root / name, ignore=shutil.ignore_patterns("__pycache__"))
        elif src.exists():
            shutil.copy2(src, root / name)
    for package in ("lib", "gpt2", "hamt", "scripts"):
        compileall.compile_dir(root / package, quiet=1)
    return root
