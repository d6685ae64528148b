"""Measured peak training memory, to check the estimate against.

`measure_peak(run, steps)` builds the configured model, optimizer and pruner
exactly as the trainer does, runs `steps` optimizer steps of lib/train/step.py's
TrainStep on random tokens (no dataset needed) and returns the peak bytes
of tensors allocated:

* CUDA: torch.cuda.max_memory_allocated, from before the model is built.
* CPU: the PyTorch profiler's allocation record (profile_memory=True): the
  running sum of every tensor allocation and free during the same span,
  whose maximum is the peak of live tensor bytes. Process RSS would add
  the interpreter, libraries and allocator caching.
"""
from __future__ import annotations

import gc
from typing import TYPE_CHECKING, Any, Callable

import torch

if TYPE_CHECKING:
    from lib.config.run_config import RunConfig


def cpu_peak_bytes(fn: Callable[[], Any]) -> int:
    """Peak live tensor bytes allocated on the CPU while fn runs."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    events = [e for e in prof.profiler.kineto_results.events()
              if e.name() == "[memory]" and str(e.device_type()).endswith("CPU")]
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
    """Build what the trainer builds and run `steps` optimizer steps."""
    from lib.model import registry
    from lib.optim import build_optimizer
    from lib.hardware.precision import resolve_precision
    from lib.hardware.speed import apply_speed
    from lib.prune.build import build_pruner
    from lib.train.recompute import enable_checkpointing
    from lib.train.step import TrainStep

    torch.manual_seed(run.TRAIN_SEED)
    family = registry.family(run.MODEL)
    cfg = family.from_run_config(run, vocab_size)
    model = family.build(cfg).to(device)
    precision = resolve_precision(run, device)
    speed = apply_speed(run, model, device, precision)  # head loss, float8, ... as a run has
    if run.TRAIN_GRADIENT_CHECKPOINTING:
        enable_checkpointing(model)
    optimizer = build_optimizer(run, model, device)
    pruner = build_pruner(run, model, optimizer)
    step = TrainStep(model, optimizer, precision, run.GPT2_GRADIENT_ACCUMULATION,
                     run.TRAIN_GRAD_CLIP, pruner, eager=speed.forward(model))
    if run.COMPILE_MODEL:
        step.forward = speed.compiled(model, model)
    generator = torch.Generator().manual_seed(0)

    def batch() -> tuple[torch.Tensor, torch.Tensor]:
        tokens = torch.randint(cfg.vocab_size, (run.BATCH_SIZE, cfg.block_size + 1),
                               generator=generator)
        return tokens[:, :-1].to(device), tokens[:, 1:].to(device)

    for i in range(steps):
        step(batch, 1e-4, i + 1)


def measure_peak(run: RunConfig, vocab_size: int, steps: int = 3,
                 device: torch.device | None = None) -> int:
    """Peak tensor bytes of `steps` training steps of `run` (module docstring)."""
    from lib.hardware.precision import resolve_device

    device = device or resolve_device(run.DEVICE)
    work = lambda: train_steps(run, device, vocab_size, steps)  # noqa: E731
    if device.type == "cuda":
        return cuda_peak_bytes(work, device)
    return cpu_peak_bytes(work)
