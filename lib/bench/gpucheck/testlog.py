"""A pytest plugin for stage a: the tests collected, then one JSON line per
test as it starts and as it ends (passed; failed with its last lines and
its exception message; skipped with the reason), so a run its time cap cuts
short still says which tests ended, which one was running and which were
not reached (JUnit XML is written only when pytest finishes).

    pytest -p lib.bench.gpucheck.testlog ...   (GPU_CHECK_TESTLOG=<file>)
"""

from __future__ import annotations

import json
import os
from typing import Any

ENV = "GPU_CHECK_TESTLOG"
LINES = 8  # of a failure kept


def _write(line: dict[str, Any]) -> None:
    path = os.environ.get(ENV)
    if path:
        with open(path, "a") as f:
            f.write(json.dumps(line) + "\n")


def failure_text(longrepr: Any) -> str:
    """A failure's last LINES lines, led by its exception message's first line
    (pytest's `E   ` line) when those lines have lost it: an assertion's
    explanation of a tensor comparison alone fills more than LINES."""
    lines = str(longrepr or "").splitlines()
    kept = lines[-LINES:]
    crash = getattr(getattr(longrepr, "reprcrash", None), "message", None) or ""
    message = crash.strip().splitlines()[0] if crash.strip() else ""
    if message and not any(line[1:].strip() == message for line in kept if line[:1] == "E"):
        kept = [f"E   {message}", *kept]
    return "\n".join(kept)


def pytest_runtest_logstart(nodeid: str, location: Any) -> None:
    _write({"test": nodeid, "event": "start"})


def pytest_runtest_logreport(report: Any) -> None:
    # A test's outcome is its call phase's, or its setup's when that failed or skipped.
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        outcome = {"passed": "passed", "skipped": "skipped"}.get(report.outcome, "failed")
        text = ""
        if report.failed:
            text = failure_text(report.longrepr)
        elif report.skipped and isinstance(report.longrepr, tuple):
            text = str(report.longrepr[2]).removeprefix("Skipped: ")  # (file, line, reason)
        _write(
            {
                "test": report.nodeid,
                "event": "end",
                "outcome": outcome,
                "seconds": round(report.duration, 2),
                "error": text,
            }
        )
    elif report.when == "teardown" and report.failed:
        _write({"test": report.nodeid, "event": "end", "outcome": "failed", "error": "teardown"})


def pytest_collection_finish(session: Any) -> None:
    _write({"event": "collected", "tests": [item.nodeid for item in session.items]})


def pytest_collectreport(report: Any) -> None:
    if report.failed:  # an import error: the file's tests never run
        _write(
            {
                "test": report.nodeid,
                "event": "end",
                "outcome": "failed",
                "seconds": 0.0,
                "error": failure_text(report.longrepr),
            }
        )
