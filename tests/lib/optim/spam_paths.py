"""AdamWSPAM's code paths (lib/optim/spam.py) as test parameters.

"fused" runs the one-pass step's operations eagerly: its scalars, buckets
and fallbacks, everything but the compiler. "compiled" compiles them as
OPTIMIZER_IMPL=fused does (on CPU inductor needs a C++ compiler, and takes
tens of seconds), so it is marked slow.
"""

from __future__ import annotations

import functools
from typing import Any

import pytest
import torch

from lib.optim import spam_fused

PATHS = ["loop", "foreach", "fused", pytest.param("compiled", marks=pytest.mark.slow)]


def eager_math(spare_unseen: bool, amsgrad: bool = False) -> Any:
    """The one-pass step's operations without compiling them (same scalars, same order)."""
    return functools.partial(spam_fused.spam_math, spare_unseen=spare_unseen, amsgrad=amsgrad)


def path_options(path: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """AdamWSPAM's arguments for `path` (and, for "fused", the eager operations)."""
    if path == "fused":
        monkeypatch.setattr(spam_fused, "compiled_math", eager_math)
    if path == "compiled":
        torch._dynamo.reset()  # graphs compiled by earlier tests count towards the limit of 8
    return {"loop": {"foreach": False}, "foreach": {"foreach": True}}.get(path, {"fused": True})


def check_path(opt: Any, path: str) -> None:
    """The optimizer took `path` (a compiled step that fell back would not have)."""
    want = {"loop": "loop", "foreach": "foreach"}.get(path, "fused (compiled)")
    assert opt.impl == want, opt.fused_error
