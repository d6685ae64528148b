"""Code of the researcher's own, named by a Kconfig string as "module:name": an
optimizer class (OPTIMIZER_CUSTOM_CLASS, lib/optim/custom.py) or a pruning
score function (PRUNING_CUSTOM_SCORE, lib/prune/custom.py).

The module is imported from the Python path, with the checkout's root on it so a
file beside the Makefile is found. A run records it by name and by the SHA-256
of its source file, so a changed file is a different configuration; the
fingerprint finds that file without importing it (source_digest).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import sys
from pathlib import Path
from typing import Any

from lib.paths import ROOT


class UserCodeError(ValueError):
    """What the user named cannot be used: one paragraph naming the symbol."""


def short(text: str, limit: int = 60) -> str:
    """`text`, cut to `limit` characters for an error message."""
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def _on_path() -> None:
    if str(ROOT) not in sys.path:
        sys.path.append(str(ROOT))


def split(spec: str, symbol: str, kind: str, example: str) -> tuple[str, str]:
    """ "module:name" -> (module, name), or a UserCodeError showing `example` of
    the `kind` of thing named ("Class", "function")."""
    module_name, sep, attribute = spec.strip().partition(":")
    if not sep or not module_name or not attribute.isidentifier():
        raise UserCodeError(
            f'{symbol}="{short(spec)}" is not "module:{kind}": name the module (dotted, '
            f"importable, e.g. a file {example.partition(':')[0]}.py in {ROOT} is "
            f'"{example.partition(":")[0]}") and the {kind.lower()}, e.g. "{example}"'
        )
    return module_name, attribute


def load(spec: str, symbol: str, kind: str, example: str) -> Any:
    """What "module:name" names, imported; a UserCodeError naming `symbol` otherwise."""
    module_name, attribute = split(spec, symbol, kind, example)
    _on_path()
    try:
        module = importlib.import_module(module_name)
    except Exception as err:  # an ImportError, or the module's own code failing
        raise UserCodeError(
            f'{symbol}="{spec}": cannot import {module_name} ({type(err).__name__}: {err}). '
            f"Put {module_name.replace('.', '/')}.py in {ROOT} or on PYTHONPATH"
        ) from None
    found = getattr(module, attribute, None)
    if found is None:
        raise UserCodeError(f'{symbol}="{spec}": {attribute} in {module_name} has no such name')
    return found


def describe(spec: str, found: Any) -> dict[str, Any]:
    """What a run records of it: the name as given, its source file and that
    file's SHA-256."""
    source = inspect.getsourcefile(found)
    digest = hashlib.sha256(Path(source).read_bytes()).hexdigest() if source else None
    return {"name": spec.strip(), "file": source, "sha256": digest}


def source_digest(spec: str) -> str:
    """The SHA-256 of the module file "module:name" is in, found without importing
    it (the fingerprint reads it for every run); "missing: <module>" when absent."""
    module = spec.partition(":")[0].strip()
    _on_path()
    try:
        found = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        found = None
    if found is None or not found.origin or not Path(found.origin).is_file():
        return f"missing: {module}"
    return hashlib.sha256(Path(found.origin).read_bytes()).hexdigest()
