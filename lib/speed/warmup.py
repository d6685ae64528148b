"""GPU_WARMUP: untimed forward passes before the first training step.

The first kernels a process runs on a GPU pay for CUDA's context, cuBLAS's
handles, the allocator's first segments and kernel loading. The warm-up
pays them before step 1, so the first progress lines show steady-state
ms/iter. It must not change what is trained: the passes run in evaluation
mode (no dropout) without gradients, on a batch of zeros (the batch
samplers are not drawn), and the random state is restored afterwards.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import torch

# knlp's warm-up (its LeNet-5 trainer) runs 10 forward passes; so does ours.
PASSES = 10


def warmup_passes(enabled: bool, device: torch.device) -> int:
    """How many passes GPU_WARMUP asks for on this device: none off CUDA."""
    return PASSES if enabled and device.type == "cuda" else 0


def warm_up(
    forward: Callable,
    model: torch.nn.Module,
    shape: tuple[int, int],
    device: torch.device,
    autocast: Callable[[], AbstractContextManager[Any]],
    passes: int,
) -> dict[str, Any] | None:
    """Run `passes` forward passes of a zero batch of `shape` (batch, block);
    returns metrics.json's record, None when there are none to run. Out of
    memory ends the warm-up, never the run: training has its own fallback."""
    if passes <= 0:
        return None
    started, was_training = time.perf_counter(), model.training
    idx = torch.zeros(shape, dtype=torch.long, device=device)
    cuda = device.type == "cuda"
    devices = (
        [device.index if device.index is not None else torch.cuda.current_device()] if cuda else []
    )
    record: dict[str, Any] = {"passes": passes}
    model.eval()
    try:
        with torch.no_grad(), torch.random.fork_rng(devices=devices):
            for _ in range(passes):
                with autocast():
                    forward(idx, idx)
            if cuda:
                torch.cuda.synchronize(device)
    except torch.cuda.OutOfMemoryError as err:
        record["error"] = f"out of memory, warm-up skipped: {str(err).splitlines()[0]}"
        torch.cuda.empty_cache()
    finally:
        model.train(was_training)
    record["seconds"] = round(time.perf_counter() - started, 3)
    return record
