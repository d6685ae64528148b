"""Tensors beside FSDP-sharded parameters.

Under FSDP2 each rank holds a row shard of every parameter (a DTensor). A
pruning mask is chosen from the whole tensor's scores, as one process chooses
it: a threshold over one rank's shard would prune every shard to the target on
its own. Muon's Newton-Schulz needs the whole matrix likewise. So a tensor is
gathered whole (full), the result computed on every rank alike, and each rank
keeps only its rows of it (like): mask memory is divided by the world size, as
lib/estimate/memory.py counts it. Elementwise work runs on the local shards
(local). Plain tensors pass through.

torch.distributed.tensor is not imported here: it takes about a second to load
(sympy among it), and a DTensor exists only once FSDP has loaded it.
"""

from __future__ import annotations

import sys

from torch import Tensor


def _dtensor(t: Tensor):
    """t's DTensor class when t is one, else None."""
    module = sys.modules.get("torch.distributed.tensor")
    return module if module is not None and isinstance(t, module.DTensor) else None


def full(t: Tensor) -> Tensor:
    """The whole tensor (a collective on a DTensor: every rank must call it)."""
    return t.full_tensor() if _dtensor(t) else t


def local(t: Tensor) -> Tensor:
    """This rank's shard, which in-place operations change (the tensor itself if plain)."""
    return t.to_local() if _dtensor(t) else t


def like(whole: Tensor, p: Tensor) -> Tensor:
    """`whole` sharded as `p` is; every rank holds the same `whole`, so no data moves."""
    module = _dtensor(p)
    if module is None:
        return whole
    return module.distribute_tensor(whole, p.device_mesh, p.placements, src_data_rank=None)
