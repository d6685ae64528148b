"""The flakiness gate's parts: a stochastic test draws its seed from TEST_SEED,
a failing one prints the line that reproduces it, a failing suite names its
random order, observe() records for scripts/test_margins.py, and the slowest
tests' table in docs/development.md is the one its JSON renders."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.stochastic import observe


def _script(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


slowest_tests = _script("slowest_tests")

SCRATCH_TEST = """
import pytest
from tests.stochastic import observe

@pytest.mark.stochastic
def test_holds_for_some_seeds(seed):
    assert observe("seed seen", seed) != 3

def test_plain():
    pass
"""


def run_scratch(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """pytest on a scratch test file under the project's conftest and markers."""
    (tmp_path / "conftest.py").write_text("from tests.conftest import *  # noqa: F403\n")
    (tmp_path / "test_scratch.py").write_text(SCRATCH_TEST)
    environment = {**os.environ, "PYTHONPATH": str(ROOT), **env}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0",
         "-c", str(ROOT / "pyproject.toml"), "--rootdir", str(tmp_path), str(tmp_path)],
        cwd=tmp_path, env=environment, capture_output=True, text=True,
    )  # fmt: skip


@pytest.mark.slow  # two pytest processes; `make test-flaky` runs the gate itself in CI
def test_a_failing_stochastic_test_names_its_seed_threads_and_kernels(tmp_path):
    observed = tmp_path / "observed.jsonl"
    passed = run_scratch(tmp_path, TEST_SEED="2", TEST_OBSERVE=str(observed))
    assert passed.returncode == 0, passed.stdout[-2000:]
    row = json.loads(observed.read_text())
    assert (row["name"], row["value"], row["seed"]) == ("seed seen", 2, 2)
    assert row["test"].endswith("test_scratch.py::test_holds_for_some_seeds")

    failed = run_scratch(tmp_path, TEST_SEED="3", TEST_THREADS="1", ATEN_CPU_CAPABILITY="default")
    assert failed.returncode == 1
    out = failed.stdout
    line = "TEST_SEED=3 TEST_THREADS=1 ATEN_CPU_CAPABILITY=default .venv/bin/pytest -p no:randomly"
    assert line in out and "test_scratch.py::test_holds_for_some_seeds'" in out, out[-3000:]
    # the random order it ran in, for a failure that depends on order
    assert "replay it with `make test TEST_ORDER=" in out, out[-3000:]


def test_observe_returns_its_value_and_writes_nothing_unasked(tmp_path, monkeypatch):
    monkeypatch.delenv("TEST_OBSERVE", raising=False)
    assert observe("x", 0.25) == 0.25
    assert list(tmp_path.iterdir()) == []


def test_the_slowest_tests_table_is_the_one_its_record_renders():
    data = json.loads(slowest_tests.RECORD.read_text())
    text = slowest_tests.PAGE.read_text()
    start = text.index(slowest_tests.BEGIN)
    end = text.index(slowest_tests.END) + len(slowest_tests.END)
    assert text[start:end] == slowest_tests.render(data)
    assert len(data["slowest"]) == slowest_tests.SHOWN and data["cpu"]
    seconds = [s for _, s in data["slowest"]]
    assert seconds == sorted(seconds, reverse=True)


def test_junit_times_read_slowest_first_without_skips(tmp_path):
    junit = tmp_path / "junit.xml"
    junit.write_text(
        '<testsuites><testsuite name="pytest" time="12.5">'
        '<testcase classname="tests.a.test_x" name="test_fast" time="0.1"/>'
        '<testcase classname="tests.a.test_x" name="test_slow[2]" time="3.0"/>'
        '<testcase classname="tests.b" name="test_gpu" time="0.0"><skipped message="cuda"/></testcase>'
        "</testsuite></testsuites>"
    )
    tests, wall = slowest_tests.read_junit(junit)
    assert tests == [
        ("tests/a/test_x.py::test_slow[2]", 3.0),
        ("tests/a/test_x.py::test_fast", 0.1),
    ]
    assert wall == 12.5


def test_recording_without_a_junit_file_says_what_to_run(tmp_path):
    out = subprocess.run(
        [sys.executable, "scripts/slowest_tests.py", "record", "--junit", str(tmp_path / "none.xml")],
        cwd=ROOT, capture_output=True, text=True,
    )  # fmt: skip
    assert out.returncode == 1 and "run `make test` first" in out.stderr


def test_a_stochastic_test_whose_file_does_not_say_so_is_refused(tmp_path):
    # make test-flaky hands scripts/flaky_gate.sh the files that say `mark.stochastic`
    from tests.conftest import pytest_collection_modifyitems

    class Item:
        def __init__(self, path, stochastic: bool):
            self.path, self.stochastic = path, stochastic

        def get_closest_marker(self, name: str):
            return object() if name == "stochastic" and self.stochastic else None

    said, hidden = tmp_path / "test_said.py", tmp_path / "test_hidden.py"
    said.write_text("@pytest.mark.stochastic\ndef test_a(seed): ...\n")
    hidden.write_text("pytestmark = [getattr(pytest.mark, 'stoch' + 'astic')]\n")
    fine = [Item(said, True), Item(hidden, False)]
    pytest_collection_modifyitems(None, fine)  # type: ignore[arg-type]
    with pytest.raises(pytest.UsageError, match=r"test_hidden.py \(stochastic\): marked") as err:
        pytest_collection_modifyitems(None, [*fine, Item(hidden, True)])  # type: ignore[arg-type]
    assert "test_said.py" not in str(err.value)
    makefile = (ROOT / "Makefile").read_text()  # the text the check asks for
    assert "-e 'mark.$(1)' tests" in makefile
    assert (
        "$(call marked,slow)" in makefile and "flaky_gate.sh $(call marked,stochastic)" in makefile
    )
