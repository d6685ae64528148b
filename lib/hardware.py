"""What the device can do: its name, memory and peak dense FLOP/s (for MFU).

Peaks are dense bf16/fp16 tensor-core figures from the vendors' datasheets
(never the 2:4-sparsity figures, which are twice these). fp32 runs on
NVIDIA use TF32 tensor cores at half the bf16 rate when allowed; we report
MFU only for 16-bit runs, where the peak is unambiguous.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import torch

# Substring of torch.cuda.get_device_name() -> dense 16-bit peak FLOP/s.
PEAK_FLOPS_16BIT = {
    "H200": 989e12,
    "H100": 989e12,
    "A100": 312e12,
    "L4": 121e12,
    "W7900": 122e12,
    "RTX 4090": 165e12,
    "RTX 4080": 97e12,
    "RTX 4070": 58e12,
    "RTX 3060": 51e12,
}


@dataclass(frozen=True)
class DeviceInfo:
    kind: str            # "cuda", "mps" or "cpu"
    name: str
    memory_bytes: int | None
    bf16: bool
    peak_flops_16bit: float | None


def describe_device(device: torch.device) -> DeviceInfo:
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        peak = next((v for k, v in PEAK_FLOPS_16BIT.items() if k in props.name), None)
        return DeviceInfo("cuda", props.name, props.total_memory,
                          torch.cuda.is_bf16_supported(), peak)
    if device.type == "mps":
        return DeviceInfo("mps", "Apple MPS", None, False, None)
    name = f"CPU ({os.cpu_count()} cores, {torch.get_num_threads()} threads)"
    return DeviceInfo("cpu", name, _ram_bytes(), True, None)


def _ram_bytes() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return None
