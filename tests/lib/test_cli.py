"""lib/cli.py: a script's process skips the garbage collection at its exit."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import ROOT

# An unreachable cycle whose finalizer says when the collector frees it.
CYCLE = """
class Cycle:
    def __del__(self):
        print("collected", flush=True)

cycle = Cycle()
cycle.me = cycle
del cycle
print("end", flush=True)
"""


@pytest.mark.parametrize("imports_cli", [False, True])
def test_a_script_exits_without_collecting_what_it_left(imports_cli):
    # Python alone, not torch: what is checked is the exit, which a call in this
    # process cannot show.
    code = ("import lib.cli\n" if imports_cli else "") + CYCLE
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    # Without lib.cli the exit's collection frees the cycle; with it, that
    # collection skips everything the script held (gc.freeze at exit).
    assert done.stdout.split() == (["end"] if imports_cli else ["end", "collected"])
