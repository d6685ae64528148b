"""Measured peak training memory, to check the estimate against.

`measure_peak(run, steps)` builds the configured model, optimizer, pruner and
step with the trainer's own build_training (lib/train/build.py), runs `steps`
optimizer steps on random tokens (no dataset needed) and returns the peak
bytes of tensors allocated:

* CUDA: torch.cuda.max_memory_allocated, from before the model is built.
* CPU: the PyTorch profiler's allocation record (profile_memory=True): the
  running sum of every tensor allocation and free during the same span,
  whose maximum is the peak of live tensor bytes. Process RSS would add
  the interpreter, libraries and allocator caching.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from lib.config.run_config import RunConfig


def cpu_peak_bytes(fn: Callable[[], Any]) -> int:
    """Peak live tensor bytes allocated on the CPU while fn runs."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    events = [
        e
        for e in prof.profiler.kineto_results.events()
        if e.name() == "[memory]" and str(e.device_type()).endswith("CPU")
    ]
    live = peak = 0
    for event in sorted(events, key=lambda e: e.start_ns()):
        live += event.nbytes()
        peak = max(peak, live)
    return peak


def cuda_peak_bytes(fn: Callable[[], Any], device: torch.device) -> int:
    gc.collect()
    torch.cuda.empty_cache()
    torch.cuda.synchronize(device)
    start = torch.cuda.memory_allocated(device)
    torch.cuda.reset_peak_memory_stats(device)
    fn()
    torch.cuda.synchronize(device)
    return torch.cuda.max_memory_allocated(device) - start


def train_steps(run: RunConfig, device: torch.device, vocab_size: int, steps: int) -> None:
    """Build what the trainer builds (lib/train/build.py) and run `steps` optimizer steps."""
    from lib.train.build import build_training

    training = build_training(run, device, vocab_size)
    cfg, step = training.config, training.step
    generator = torch.Generator().manual_seed(0)

    def batch() -> tuple[torch.Tensor, torch.Tensor]:
        tokens = torch.randint(
            cfg.vocab_size, (run.BATCH_SIZE, cfg.block_size + 1), generator=generator
        )
        return tokens[:, :-1].to(device), tokens[:, 1:].to(device)

    for i in range(steps):
        step(batch, 1e-4, i + 1)


def measure_peak(
    run: RunConfig, vocab_size: int, steps: int = 3, device: torch.device | None = None
) -> int:
    """Peak tensor bytes of `steps` training steps of `run` (module docstring)."""
    from lib.hardware.precision import resolve_device

    device = device or resolve_device(run.DEVICE)
    work = lambda: train_steps(run, device, vocab_size, steps)  # noqa: E731
    if device.type == "cuda":
        return cuda_peak_bytes(work, device)
    return cpu_peak_bytes(work)
