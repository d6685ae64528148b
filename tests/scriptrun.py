"""A script run in the test's own process, as `python scripts/<name>.py ARGS` runs it.

runpy executes the file as __main__, so its own `if __name__ == "__main__":` block
(run_script's error handling and exit code) is what runs, with sys.argv set as the
command line sets it. The result is a CompletedProcess: the exit code, stdout and
stderr (pytest's capsys), as subprocess.run(..., capture_output=True, text=True)
gives them, without starting Python and importing the libraries anew. An uncaught
exception propagates: a subprocess would have printed its traceback and failed.
"""

from __future__ import annotations

import runpy
import subprocess
import sys

import pytest

from tests.conftest import ROOT


def run_script_here(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, script: str, *args: str
) -> subprocess.CompletedProcess[str]:
    """scripts/<name>.py (script relative to the repository root) with args."""
    path = ROOT / script
    argv = [str(path), *args]
    capsys.readouterr()  # what the test printed before is not the script's
    with monkeypatch.context() as patched:
        patched.setattr(sys, "argv", argv)
        try:
            runpy.run_path(str(path), run_name="__main__")
            code, message = 0, ""
        except SystemExit as done:
            code, message = done.code, ""
            if isinstance(code, str):  # sys.exit("text"): printed to stderr, exit 1
                code, message = 1, code + "\n"
            elif code is None:
                code = 0
    out = capsys.readouterr()
    return subprocess.CompletedProcess(argv, code, out.out, out.err + message)
