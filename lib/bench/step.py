"""Training-step benchmark: our TrainStep against a plain PyTorch loop.

Both train identical copies of the configured model on the same synthetic
batches, in alternating rounds so that both see the same machine state; the
first steps of each (compilation, allocator warm-up) are excluded. The plain
loop is what a careful researcher writes by hand, nanoGPT's loop: autocast,
backward, clip, torch.optim.AdamW fused on CUDA and torch's default (the
per-tensor loop) elsewhere, as nanoGPT configures it. Ours is the trainer's
TrainStep with the configured optimizer (OPTIMIZER_IMPL) and pruner; the
result names what each side ran.

Then a few of our steps run under torch.profiler and the time inside each
of TrainStep's phase ranges (lib/train/step.py RANGES) is summed: forward,
backward, optimizer, pruning, data, and host overhead, the rest of the
step's wall time (on CUDA each phase ends with a device synchronize, so a
phase's time is its device work and the rest is the GPU waiting on the host).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from torch.profiler import ProfilerActivity, profile

from lib.data.vocab import configured_vocab
from lib.hardware.devices import describe_device
from lib.model import registry
from lib.optim import optimizer_impl
from lib.run.metrics import mfu, peak_memory_mb
from lib.speed.compile import compile_model
from lib.speed.precision import Precision, resolve_device
from lib.train.build import Training, build_training
from lib.train.step import RANGES, TrainStep

if TYPE_CHECKING:
    from lib.config.run_config import RunConfig


def plain_step(
    model: torch.nn.Module,
    forward: Callable,
    optimizer: torch.optim.Optimizer,
    precision: Precision,
    accumulation: int,
    clip: float,
) -> Callable:
    def step(next_batch: Callable, lr: float) -> torch.Tensor:
        """One optimizer step; the last micro-batch's loss, unread."""
        for _ in range(accumulation):
            x, y = next_batch()
            with precision.autocast():
                _, loss = forward(x, y)
            (loss / accumulation).backward()
        if clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss

    return step


def median_seconds(call: Callable[[], Any], repeats: int, device: torch.device) -> float:
    """Median wall time of call() over `repeats` calls (CUDA synchronised)."""
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        call()
        if device.type == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


PINNED_SLOTS = 4  # host buffers in turn: a copy in flight is never overwritten


def synthetic_batches(vocab: int, shape: tuple[int, int], device: torch.device) -> Callable:
    """Random token batches (targets = inputs shifted) from a fixed seed. On
    CUDA they are drawn into pinned host buffers, taken in turn, and copied
    with non_blocking=True, as the trainer's loader does: a copy from
    pageable memory would make the host wait for the stream on every batch.
    A buffer is written again only once its last copy has ended (its event)."""
    gen = torch.Generator().manual_seed(0)
    if device.type != "cuda":

        def next_batch():
            x = torch.randint(vocab, shape, generator=gen)
            return x.to(device), torch.roll(x, -1, dims=1).to(device)

        return next_batch
    slots = [
        (torch.empty((2, *shape), dtype=torch.long).pin_memory(), torch.cuda.Event())
        for _ in range(PINNED_SLOTS)
    ]
    turn = [0]

    def next_pinned_batch():
        host, copied = slots[turn[0] % PINNED_SLOTS]
        turn[0] += 1
        copied.synchronize()  # (returns at once for an event never recorded)
        host[0] = torch.randint(vocab, shape, generator=gen)
        host[1] = torch.roll(host[0], -1, dims=1)
        both = host.to(device, non_blocking=True)
        copied.record()
        return both[0], both[1]

    return next_pinned_batch


@dataclass
class BenchSetup:
    """The training stack on its device, with synthetic batches to train on."""

    device: torch.device
    training: Training
    next_batch: Callable


def bench_setup(run: RunConfig) -> BenchSetup:
    """Our side as the trainer builds it (lib/train/build.py), on synthetic batches."""
    device = resolve_device(run.DEVICE)
    training = build_training(run, device, configured_vocab(run.data))
    config = training.config
    batches = synthetic_batches(config.vocab_size, (run.BATCH_SIZE, config.block_size), device)
    return BenchSetup(device, training, batches)


def plain_model(run: RunConfig, setup: BenchSetup) -> torch.nn.Module:
    """A fresh copy of the configured model without the run's speed options:
    the same family, config and seed, so the same initial weights."""
    torch.manual_seed(run.TRAIN_SEED)
    return registry.family(run.MODEL).build(setup.training.config).to(setup.device)


def _time(step: Callable, next_batch: Callable, steps: int, device: torch.device) -> float:
    return median_seconds(lambda: step(next_batch, 1e-4), steps, device)


class Numbered:
    """Calls a TrainStep with increasing step numbers, from after the pruner's
    warmup, so a configured pruner updates its masks every PRUNING_FREQUENCY
    steps during the bench, as it does in a run."""

    def __init__(self, step: TrainStep):
        self.step = step
        self.count = step.pruner.warmup if step.pruner is not None else 0

    def __call__(self, next_batch: Callable, lr: float) -> torch.Tensor:
        self.count += 1
        return self.step(next_batch, lr, self.count)


def step_breakdown(
    step: TrainStep, next_batch: Callable, steps: int, device: torch.device
) -> dict[str, Any]:
    """Milliseconds per step in each phase of `steps` profiled steps; the phases
    and host_overhead sum to step_ms (module docstring)."""
    numbered = Numbered(step)
    numbered(next_batch, 1e-4)  # the profiler's own warm-up
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        step.synchronize = lambda: torch.cuda.synchronize(device)
    try:
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            t0 = time.perf_counter()
            for _ in range(steps):
                numbered(next_batch, 1e-4)
            wall_ms = 1000 * (time.perf_counter() - t0) / steps
    finally:
        step.synchronize = None
    by_range = {event.key: event.cpu_time_total for event in prof.key_averages()}
    parts = {name: by_range.get(key, 0.0) / 1000 / steps for name, key in RANGES.items()}
    parts["host_overhead"] = wall_ms - sum(parts.values())
    return {
        "steps": steps,
        "step_ms": wall_ms,
        "parts_ms": parts,
        "shares": {name: ms / wall_ms for name, ms in parts.items()},
    }


def run_bench(
    run: RunConfig,
    steps: int = 10,
    warmup: int = 3,
    rounds: int = 3,
    profile_steps: int = 5,
    plain: bool = True,
) -> dict[str, Any]:
    """Our step against the plain loop (plain=False: ours alone, e.g. to compare
    speed options; profile_steps=0: no profiled breakdown)."""
    setup = bench_setup(run)
    device, training, next_batch = setup.device, setup.training, setup.next_batch
    precision, config, ours_model = training.precision, training.config, training.model
    ours, optimizer, speed = training.step, training.optimizer, training.speed
    accum, clip = run.GPT2_GRADIENT_ACCUMULATION, run.TRAIN_GRAD_CLIP
    loops: dict[str, Callable] = {"ours": Numbered(ours)}
    reference = plain_model(run, setup) if plain else None
    if reference is not None:
        plain_forward = compile_model(reference) if run.COMPILE_MODEL else reference
        # nanoGPT's choice: the fused kernel on CUDA, torch's default elsewhere.
        plain_opt = torch.optim.AdamW(
            reference.param_groups(run.WEIGHT_DECAY), lr=1e-4, fused=device.type == "cuda"
        )
        loops["plain"] = plain_step(reference, plain_forward, plain_opt, precision, accum, clip)

    for loop in loops.values():
        _time(loop, next_batch, warmup, device)
    seconds: dict[str, list[float]] = {name: [] for name in loops}
    for _ in range(rounds):
        for name, loop in loops.items():
            seconds[name].append(_time(loop, next_batch, steps, device))
    result = _report(run, config, ours_model, precision, device, seconds, steps, rounds)
    result["ours"]["optimizer"] = optimizer_impl(optimizer)
    result["ours"]["pruning"] = run.PRUNING_METHOD if ours.pruner is not None else None
    if reference is not None:
        result["plain"]["optimizer"] = optimizer_impl(plain_opt)
        result["plain"]["pruning"] = None
    result["ours"]["speed"] = speed.record()
    result["threads"] = torch.get_num_threads()
    if profile_steps:
        result["breakdown"] = step_breakdown(ours, next_batch, profile_steps, device)
    return result


def _report(
    run: RunConfig,
    config: Any,
    model: torch.nn.Module,
    precision: Precision,
    device: torch.device,
    seconds: dict[str, list[float]],
    steps: int,
    rounds: int,
) -> dict[str, Any]:
    tokens = run.derived()["tokens_per_iter"]
    info = describe_device(device)
    peak_flops = info.peak_flops_16bit if precision.dtype != "fp32" else None
    fpt = model.flops_per_token(config.block_size)
    result: dict[str, Any] = {
        "model_config": {k: getattr(config, k) for k in vars(config)},
        "params": sum(p.numel() for p in model.parameters()),
        "device": info.name,
        "dtype": precision.dtype,
        "compiled": bool(run.COMPILE_MODEL),
        "batch_size": run.BATCH_SIZE,
        "gradient_accumulation": run.GPT2_GRADIENT_ACCUMULATION,
        "tokens_per_iter": tokens,
        "steps_per_round": steps,
        "rounds": rounds,
    }
    for name, values in seconds.items():
        s = statistics.median(values)
        result[name] = {
            "ms_per_iter": 1000 * s,
            "tokens_per_sec": tokens / s,
            "mfu": mfu(fpt, tokens / s, peak_flops),
        }
    result["peak_memory_mb"], result["peak_memory_measure"] = peak_memory_mb(device)
    if "plain" in seconds:
        result["speed_vs_plain"] = result["plain"]["ms_per_iter"] / result["ours"]["ms_per_iter"]
        # Each round's own ratio (the rounds alternate): their spread says how noisy the machine was.
        result["speed_vs_plain_rounds"] = [p / o for p, o in zip(seconds["plain"], seconds["ours"])]
    return result
