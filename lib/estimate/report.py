"""`make estimate`: the memory table for a RunConfig and which devices it fits."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from lib.estimate.fit import plan_batch
from lib.estimate.memory import (
    GIB,
    MIB,
    MemoryEstimate,
    configured_device,
    estimate_memory,
    world_size,
)
from lib.estimate.timing import estimate_seconds
from lib.hardware.devices import KNOWN_GPUS, DeviceInfo, cpu_info, profile_info

if TYPE_CHECKING:
    from lib.config.run_config import RunConfig

LABELS = {
    "parameters": "parameters (fp32)",
    "gradients": "gradients (fp32)",
    "optimizer": "optimizer states",
    "activations": "activations",
    "logits": "logits (loss buffers)",
    "overhead": "overhead",
}


def with_checkpointing(run: RunConfig, on: bool) -> RunConfig:
    return replace(run, TRAIN_GRADIENT_CHECKPOINTING=on)


def largest_fitting_batch(
    run: RunConfig, info: DeviceInfo, vocab: int | None, limit: int = 4096
) -> int:
    """The largest micro-batch (accumulation as configured) that fits, 0 if none."""
    low, high = 0, limit
    while low < high:
        mid = (low + high + 1) // 2
        est = estimate_memory(run, vocab, batch_size=mid, device_info=info)
        low, high = (mid, high) if est.fits(info.memory_bytes) else (low, mid - 1)
    return low


def _gib(value: int | float) -> str:
    return f"{value / GIB:8.2f}"


def breakdown(est: MemoryEstimate, other: MemoryEstimate) -> list[str]:
    """Component lines; `other` is the same run with checkpointing flipped."""
    lines = [f"  {'component':<52}{'GiB':>8}"]
    notes = {
        "parameters": f"{est.params / 1e6:.1f}M",
        "optimizer": f"{est.optimizer_label} state" + (" + pruning buffers" if est.pruned else ""),
        "activations": (
            f"{est.n_layer} x {est.activations_per_layer / MIB:.1f} MiB"
            + (", checkpointed" if est.checkpointing else "")
        ),
        "logits": f"{est.batch_size} x {est.block_size} x {est.vocab_size}",
        "overhead": "autocast copies, batch, workspace",
    }
    for name, label in LABELS.items():
        note = f" [{notes[name]}]" if name in notes else ""
        lines.append(f"  {(label + note)[:52]:<52}{_gib(getattr(est, name))}")
    lines.append(f"  {'total (peak: ' + est.phase + ')':<52}{_gib(est.total_bytes)}")
    word = "with" if other.checkpointing else "without"
    lines.append(
        f"  {word + ' gradient checkpointing: activations':<52}"
        f"{_gib(other.activations)}   total {other.total_bytes / GIB:.2f} GiB"
    )
    if not est.fused_attention:
        lines.append("  attention: no fused kernel here, T x T scores are kept per layer")
    return lines


def layer_lines(est: MemoryEstimate, top: int = 6) -> list[str]:
    parts = sorted(est.per_layer.items(), key=lambda kv: -kv[1])[:top]
    return ["  per layer: " + ", ".join(f"{k} {v / MIB:.1f} MiB" for k, v in parts)]


def fit_lines(run: RunConfig, vocab: int | None) -> list[str]:
    header = (
        f"  {'device':<16}{'memory':>10}{'needs':>10}  {'fits':<5}{'max micro-batch':>16}  time"
    )
    lines = [header]
    devices = [profile_info(p) for p in KNOWN_GPUS] + [cpu_info()]
    for info in devices:
        est = estimate_memory(run, vocab, device_info=info)
        fits = est.fits(info.memory_bytes)
        seconds = estimate_seconds(run, info)
        name = "CPU RAM (here)" if info.kind == "cpu" else info.name
        lines.append(
            f"  {name:<16}{_gib(info.memory_bytes or 0)} G{_gib(est.required_bytes())} G"
            f"  {'yes' if fits else 'no':<5}{largest_fitting_batch(run, info, vocab):>16}"
            f"  {_duration(seconds)} ({est.dtype})"
        )
    return lines


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    if 0 < seconds < 0.5:
        return "<1 s"  # a time, not nothing
    if seconds < 120:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min" if seconds < 7200 else f"{seconds / 3600:.1f} h"


def report(run: RunConfig, device_info: DeviceInfo | None = None, vocab: int | None = None) -> str:
    """The whole `make estimate` text."""
    plan = None
    if run.HYPER_PARAM == "auto":  # size what the run would choose on this device
        info = device_info or configured_device(run)
        run, plan = plan_batch(run, info, world_size(run), vocab)
    est = estimate_memory(run, vocab, device_info=device_info)
    other = estimate_memory(
        with_checkpointing(run, not est.checkpointing), vocab, device_info=device_info
    )
    title = (
        f"Memory estimate per device: {run.MODEL}, micro-batch {est.batch_size} x "
        f"{est.block_size} tokens, accumulation {est.accumulation}, {est.dtype} on "
        f"{est.device}" + (f", world {est.world_size}" if est.world_size > 1 else "")
    )
    lines = [
        title,
        *breakdown(est, other),
        *layer_lines(est),
        "",
        "Known devices (needs = estimate + 10 % + runtime context; time = whole run, assumed MFU):",
        *fit_lines(run, vocab),
    ]
    if plan is not None:
        lines.insert(1, "  " + plan.describe())
    return "\n".join(lines)
