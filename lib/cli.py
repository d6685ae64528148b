"""How every script ends: user errors as one 'error:' paragraph, no traceback.

Imports nothing heavy: configuration commands must stay fast, so scripts
pass the error types they can raise besides ConfigError. It imports lib/rules.py,
so every script checks its configuration against every package's rules and
every trainer runs every package's analyses.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import lib.rules  # noqa: F401  (registers every package's rules and analyses)
from lib.config.kconfig import ConfigError


def run_script(
    main: Callable[[list[str]], int | None],
    errors: tuple[type[Exception], ...] = (),
    error_code: int = 1,
) -> None:
    """Call main(argv); exit with its return code, or print a user error and exit."""
    caught: tuple[type[Exception], ...] = (ConfigError, *errors)
    try:
        code = main(sys.argv[1:])
    except caught as err:
        print(f"error: {err}", file=sys.stderr)
        raise SystemExit(error_code) from None
    raise SystemExit(code or 0)
