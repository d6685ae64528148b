"""How every script ends: user errors as one 'error:' paragraph, no traceback,
and no garbage collection on the way out.

Imports nothing heavy: configuration commands must stay fast, so scripts
pass the error types they can raise besides ConfigError. It hands lib/rules.py
down to the configuration layer, imported on the first check, so every script
checks its configuration against every package's rules and every trainer runs
every package's analyses.
"""

from __future__ import annotations

import atexit
import gc
import sys
from collections.abc import Callable

from lib.config.kconfig import ConfigError
from lib.config.rules import register_owners_with
from lib.console import Console


def _register_owners() -> None:
    import lib.rules  # noqa: F401  (every package's rules and the trainer's analyses)


# On the first configuration check or trainer start, not at every script's start.
register_owners_with(_register_owners)

# The interpreter's exit collects every object still tracked: torch's, and
# torch._dynamo's once torch.optim has imported it, some 300,000, which took
# 0.3-0.6 s of each command on a 2-core host. Frozen by this exit handler,
# which runs after those registered later (the libraries'), they are skipped. A file the
# command wrote is closed by then (records and checkpoints are written
# atomically); an unreachable cycle stays unfreed, as the process ends.
atexit.register(gc.freeze)


def run_script(
    main: Callable[[list[str]], int | None],
    errors: tuple[type[Exception], ...] = (),
    error_code: int = 1,
) -> None:
    """Call main(argv); exit with its return code, or print a user error and exit.
    Output to a reader that went away is dropped, never an error (Console)."""
    caught: tuple[type[Exception], ...] = (ConfigError, *errors)
    streams = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = Console(sys.stdout), Console(sys.stderr)
    try:
        try:
            code = main(sys.argv[1:])
        except caught as err:
            print(f"error: {err}", file=sys.stderr)
            raise SystemExit(error_code) from None
    finally:
        sys.stdout, sys.stderr = streams
    raise SystemExit(code or 0)
