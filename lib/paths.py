"""Where things are: the one module that knows the repository's layout.

Relative paths a user gives in the configuration (RESULTS_DIR, BACKUP_DIR,
DATA_DIR, evaluation files) are taken from the repository root, not from
the shell's working directory, so `make` and the scripts agree.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KCONFIG = ROOT / "Kconfig"
DOT_CONFIG = ROOT / ".config"
CONFIG_PY = ROOT / "config.py"
SYMBOLS_PY = ROOT / "lib" / "config" / "symbols.py"  # generated from the Kconfig files
DEFCONFIGS = ROOT / "defconfigs"
SWEEPS = ROOT / "sweeps"
SCRIPTS = ROOT / "scripts"
DEFAULT_RESULTS = ROOT / "results"


def from_root(path: str | Path) -> Path:
    """An absolute path as given; a relative one under the repository root."""
    path = Path(path)
    return path if path.is_absolute() else ROOT / path
