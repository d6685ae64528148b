"""lib/cli.py: a script's process skips the garbage collection at its exit, and its
output to a reader that went away is dropped, not an error."""

from __future__ import annotations

import os
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


def test_a_console_whose_reader_left_drops_the_rest_and_the_script_goes_on(tmp_path):
    """`make | tee` and Ctrl-C: tee exits first. The script's writes after that
    reach /dev/null, and it finishes its work (here a file) with its own exit code."""
    script = (
        "import sys\n"
        "from lib.cli import run_script\n"
        "def main(argv):\n"
        "    for i in range(100_000):\n"
        "        print('line', i)\n"
        "    print('to stderr too', file=sys.stderr)\n"
        f"    open({str(tmp_path / 'done')!r}, 'w').write('yes')\n"
        "    return 3\n"
        "run_script(main)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", script],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.stdout is not None
    proc.stdout.read(100)
    proc.stdout.close()  # the reader goes away mid-output
    assert proc.wait(timeout=60) == 3
    assert (tmp_path / "done").read_text() == "yes"


def test_a_console_without_a_descriptor_drops_to_devnull():
    import io

    from lib.console import Console

    class Closed(io.StringIO):
        def write(self, text):
            raise BrokenPipeError

    console = Console(Closed())
    assert console.write("lost") == 4
    assert console.write("still lost") == 10  # /dev/null from now on
    console.flush()


def test_a_console_over_a_stream_whose_write_returns_none_counts_the_text():
    from lib.console import Console

    class Quiet:
        def __init__(self):
            self.got = []

        def write(self, text):
            self.got.append(text)  # returns None, as some file-likes do

    quiet = Quiet()
    assert Console(quiet).write("abc") == 3 and quiet.got == ["abc"]
