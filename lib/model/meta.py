"""Models built for their shapes alone: on the meta device, with no initialiser run.

A meta tensor holds no values, yet nn.init's functions still run on one, and the
random ones (normal_, uniform_) take PyTorch's Python reference path there, whose
first call imports torch._dynamo. For a command that only plans (`make estimate`,
a dry run, a matrix's or a study's plan) that import was 2.2 s of its 5.4 s on a
2-core AVX2 host. (A training process imports torch._dynamo anyway: torch.optim's
Optimizer does on its first construction.) Inside shapes_only() an initialiser given
a meta tensor hands it back untouched; every other call, a real tensor's initialiser
included, runs as always. It is a TorchFunctionMode: it holds for the calling thread only.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

# nn.init's in-place initialisers and the tensor fills they end in.
INITIALISERS = frozenset(
    [torch.Tensor.normal_, torch.Tensor.uniform_]
    + [
        getattr(torch.nn.init, name)
        for name in dir(torch.nn.init)
        if name.endswith("_") and not name.startswith("_")
    ]
)


class _NoInitOnMeta(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in INITIALISERS:
            tensor = args[0] if args else kwargs.get("tensor", kwargs.get("self"))
            if isinstance(tensor, torch.Tensor) and tensor.is_meta:
                return tensor
        return func(*args, **kwargs)


def _refresh_device_constructors() -> None:
    """torch.device(...) as a context sends the factory functions of a set to that device,
    a set torch computes once per process from the functions `torch` holds then. If that
    first time fell while a library had swapped one out (transformers' from_pretrained
    replaces torch.linspace with a wrapper while it builds a model), the real one is
    missing from the set for good and its tensors land on the CPU. So the set is computed
    anew here (a private cache of torch.utils._device; skipped if it is gone)."""
    from torch.utils import _device

    clear = getattr(getattr(_device, "_device_constructors", None), "cache_clear", None)
    if clear is not None:
        clear()


@contextlib.contextmanager
def shapes_only() -> Iterator[Any]:
    """Build modules on the meta device without running their initialisers."""
    _refresh_device_constructors()
    with torch.device("meta"), _NoInitOnMeta():
        yield
