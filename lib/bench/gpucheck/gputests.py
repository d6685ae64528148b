"""Stage a of `make gpu-check`: every GPU test (`pytest -m gpu`) with its own
recorded result: passed, failed with its last lines, or skipped with the
reason (testlog.py writes each as it ends).

Only the test files that hold GPU tests are collected, and of those none
that imports, at module level (through the project's own modules and the
conftest files above it), a package this node lacks: a bare GPU node has no
lm-eval, grimp or import-linter, and one import error at collection stops
the whole run. Such a file is recorded as not collected, with what it lacks.
GPU_CHECK_QUICK=1 asks the tests for their short matrices (HAMT's kernel
test: one dtype x two shapes; `pytest -m gpu` runs the whole matrix). A run
resumed after its cap (figures.py) runs only the tests it had not reached.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from lib.bench.gpucheck import settings as S
from lib.bench.gpucheck import testlog
from lib.bench.gpucheck.figures import StageSkipped, reached

QUICK_ENV = "GPU_CHECK_QUICK"
OWN = ("lib", "gpt2", "hamt", "tests", "scripts")  # the project's top-level packages
LAST = ("tests/hamt/",)  # kernel autotuning: what the cap should cut, if anything
TEST_TIMEOUT_S = 90  # one hung test fails alone (pytest-timeout, where installed)


def gpu_test_files(root: Path = S.ROOT) -> list[str]:
    """tests/**/test_*.py holding a GPU test, the LAST ones at the end."""
    paths = sorted(
        str(p.relative_to(root))
        for p in (root / "tests").rglob("test_*.py")
        if "mark.gpu" in p.read_text()
    )
    return sorted(paths, key=lambda p: p.startswith(LAST))


def _module_file(module: str, root: Path) -> Path | None:
    base = root.joinpath(*module.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def _imports(path: Path, root: Path) -> list[str]:
    """The modules a file imports when it is imported: module-level import
    statements, not those under `try` (guarded) or `if TYPE_CHECKING`."""
    names: list[str] = []
    package = ".".join(path.parent.relative_to(root).parts)
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module != "__future__":
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1])
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            names.append(module)
            names += [f"{module}.{alias.name}" for alias in node.names]  # maybe submodules
    return names


def missing_imports(test_file: str, root: Path = S.ROOT) -> list[str]:
    """The top-level packages that importing test_file (with its conftest
    files) needs and this interpreter cannot find."""
    start = [root / test_file] + [
        parent / "conftest.py"
        for parent in (root / test_file).parents
        if parent.is_relative_to(root / "tests") and (parent / "conftest.py").is_file()
    ]
    seen: set[Path] = set()
    queue = list(start)
    missing: set[str] = set()
    while queue:
        path = queue.pop()
        if path in seen:
            continue
        seen.add(path)
        for name in _imports(path, root):
            top = name.split(".")[0]
            if top in OWN:
                parts = name.split(".")
                for i in range(1, len(parts) + 1):  # the packages on the way are imported too
                    found = _module_file(".".join(parts[:i]), root)
                    if found is not None:
                        queue.append(found)
            elif importlib.util.find_spec(top) is None:
                missing.add(top)
    return sorted(missing)


def _events(log: Path) -> list[dict[str, Any]]:
    """The complete lines testlog.py has written so far (the last may be half written)."""
    text = log.read_text() if log.exists() else ""
    return [json.loads(line) for line in text.split("\n")[:-1] if line]


def _put_tests(
    events: list[dict[str, Any]], put: Any, earlier: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Every test's outcome, seconds and detail (a failure's last lines, a
    skip's reason), the test running and those not reached, on top of the
    `earlier` figures of the run this one resumes."""
    earlier = earlier or {}
    tests: dict[str, str] = dict(earlier.get("tests", {}))
    seconds: dict[str, float] = dict(earlier.get("seconds", {}))
    details: dict[str, str] = dict(earlier.get("details", {}))
    collected: list[str] = list(earlier.get("collected", []))
    running = None
    for e in events:
        if e["event"] == "collected":
            collected += [t for t in e["tests"] if t not in collected]
            continue
        if e["event"] == "start":
            running = e["test"]
            continue
        tests[e["test"]] = e["outcome"]
        seconds[e["test"]] = e.get("seconds", 0.0)
        if e.get("error"):
            details[e["test"]] = e["error"]
        if running == e["test"]:
            running = None
    not_reached = [t for t in collected if t not in tests]
    counts = {s: sum(v == s for v in tests.values()) for s in ("passed", "failed", "skipped")}
    counts["not_reached"] = len(not_reached)
    counts["not_collected"] = len(earlier.get("not_collected", {}))
    put("counts", counts)
    put("tests", tests)
    put("seconds", seconds)
    put("details", details)
    put("collected", collected)
    put("not_reached", not_reached)
    put("running", running)
    return {"counts": counts, "tests": tests, "details": details}


def gpu_tests(device: str, work: Path, put: Any) -> None:
    """a: the GPU tests this node can import, or (resumed) those not reached."""
    earlier = reached(put)
    log = work / "gpu-tests.jsonl"
    log.unlink(missing_ok=True)
    if earlier.get("not_reached"):
        not_collected = earlier.get("not_collected", {})
        targets = list(earlier["not_reached"])
        print(f"resuming: {len(targets)} tests not reached by the run cut short", flush=True)
    else:
        earlier = {}
        not_collected = {}
        targets = []
        for path in gpu_test_files():
            lacking = missing_imports(path)
            if lacking:
                not_collected[path] = f"not collected: imports {', '.join(lacking)}, not installed"
            else:
                targets.append(path)
    earlier["not_collected"] = not_collected
    put("not_collected", not_collected)
    command = [sys.executable, "-m", "pytest", "-m", "gpu", "-q", "-p", "no:cacheprovider"]
    command += ["-p", "lib.bench.gpucheck.testlog", "--continue-on-collection-errors"]
    if importlib.util.find_spec("pytest_timeout") is not None:  # loads itself as a plugin
        command += [f"--timeout={TEST_TIMEOUT_S}"]
    env = {**os.environ, testlog.ENV: str(log), QUICK_ENV: "1"}
    out = work / "gpu-tests.out"  # a file, not a pipe: long tracebacks would fill a pipe
    with out.open("w") as sink:
        proc = subprocess.Popen(
            command + targets, cwd=S.ROOT, env=env, stdout=sink, stderr=subprocess.STDOUT
        )
    seen = -1
    figures: dict[str, Any] = {}
    while True:
        ended = proc.poll() is not None
        events = _events(log)
        if len(events) != seen:
            seen = len(events)
            figures = _put_tests(events, put, earlier)
        if ended:
            break
        time.sleep(1.0)
    output = out.read_text()
    print(output.rstrip())
    counts = figures["counts"]
    if proc.returncode not in (0, 5) or counts["failed"]:  # 5: nothing collected
        raise RuntimeError(
            f"{counts['failed']} GPU tests failed (pytest exit {proc.returncode}):\n"
            + "\n".join(output.strip().splitlines()[-8:])
        )
    if counts["passed"] == 0 and counts["skipped"]:
        skipped = [t for t, outcome in figures["tests"].items() if outcome == "skipped"]
        why = Counter(figures["details"].get(t, "") for t in skipped)
        raise StageSkipped(
            f"all {counts['skipped']} GPU tests skipped ({why.most_common(1)[0][0] or 'no reason'})"
        )
