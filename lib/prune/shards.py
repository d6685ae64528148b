"""Masks beside FSDP-sharded parameters.

Under FSDP2 each rank holds a row shard of every parameter (a DTensor). A
mask is chosen from the whole tensor's scores, as one process chooses it: a
threshold over one rank's shard would prune every shard to the target on its
own. So scores are gathered whole (full), the mask is chosen on every rank
alike, and each rank keeps only its rows of it (like): mask memory is divided
by the world size, as lib/estimate/memory.py counts it. Masking itself is
elementwise and runs on the local shards (local). Plain tensors pass through.
"""

from __future__ import annotations

from torch import Tensor
from torch.distributed.tensor import DTensor, distribute_tensor


def full(t: Tensor) -> Tensor:
    """The whole tensor (a collective on a DTensor: every rank must call it)."""
    return t.full_tensor() if isinstance(t, DTensor) else t


def local(t: Tensor) -> Tensor:
    """This rank's shard, which in-place operations change (the tensor itself if plain)."""
    return t.to_local() if isinstance(t, DTensor) else t


def like(whole: Tensor, p: Tensor) -> Tensor:
    """`whole` sharded as `p` is; every rank holds the same `whole`, so no data moves."""
    if not isinstance(p, DTensor):
        return whole
    return distribute_tensor(whole, p.device_mesh, p.placements, src_data_rank=None)
