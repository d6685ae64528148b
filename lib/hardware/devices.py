"""What the device can do: its name, memory, bf16 support and peak FLOP/s.

Two sources: the device present (describe_device: CUDA or ROCm through
torch.cuda, Apple MPS, or the CPU's cores and RAM), and a table of known
GPUs (KNOWN_GPUS) that `make estimate` checks a configuration against.

Peaks are dense bf16/fp16 tensor-core figures from the vendors' datasheets
(never the 2:4-sparsity figures, which are twice these). fp32 runs on
NVIDIA use TF32 tensor cores at half the bf16 rate when allowed; we report
MFU only for 16-bit runs, where the peak is unambiguous. Memory is the total
the driver reports (nvidia-smi / rocm-smi, MiB), before the CUDA context.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch

MIB = 2**20


@dataclass(frozen=True)
class GPUProfile:
    """A known accelerator: `match` is a substring of its device name."""

    name: str
    match: str
    memory_bytes: int
    peak_flops_16bit: float
    source: str  # where the peak comes from: the vendor document and its row
    bf16: bool = True


_AMPERE = "NVIDIA A100 datasheet, BF16 Tensor Core (dense)"
_HOPPER = (
    "NVIDIA H100 datasheet, BF16 Tensor Core, {} column, halved (the table quotes 2:4 sparsity)"
)
_H200 = "NVIDIA H200 datasheet, BF16 Tensor Core, {} column, halved (the table quotes 2:4 sparsity)"
_ADA = (
    "NVIDIA Ada Lovelace whitepaper, appendix table, Peak FP16 Tensor TFLOPS with FP32 "
    "Accumulate (dense; BF16 runs at the same rate)"
)
_GA10X = (
    "NVIDIA Ampere GA102 whitepaper, Peak FP16 Tensor TFLOPS with FP32 Accumulate: "
    "GA106 (28 SMs x 1777 MHz boost x 512 FLOP/clk/SM), as the Ada rows use"
)

# In the order `make estimate` prints them. A name stem can cover several
# cards (A100 40/80 GB; every H100): describe_device takes the longest stem
# that the driver's name contains ("H100 PCIe" before "H100"), then the
# nearest memory. Every GeForce row uses the FP32-accumulate figure, which
# is what PyTorch's bf16/fp16 matmuls use (the FP16-accumulate figure is
# twice it and no training run reaches it).
KNOWN_GPUS: tuple[GPUProfile, ...] = (
    GPUProfile("A100 40GB", "A100", 40960 * MIB, 312e12, _AMPERE),
    GPUProfile("A100 80GB", "A100", 81920 * MIB, 312e12, _AMPERE),
    GPUProfile("H100 SXM 80GB", "H100", 81559 * MIB, 989e12, _HOPPER.format("H100 SXM")),
    GPUProfile("H100 PCIe 80GB", "H100 PCIe", 81559 * MIB, 756e12, _HOPPER.format("H100 PCIe")),
    GPUProfile("H100 NVL 94GB", "H100 NVL", 95830 * MIB, 835e12, _HOPPER.format("H100 NVL")),
    GPUProfile("H200 SXM 141GB", "H200", 143771 * MIB, 989e12, _H200.format("H200 SXM")),
    GPUProfile("H200 NVL 141GB", "H200 NVL", 143771 * MIB, 835e12, _H200.format("H200 NVL")),
    GPUProfile(
        "L4 24GB",
        "L4",
        23034 * MIB,
        121e12,
        "NVIDIA L4 datasheet, BF16 Tensor Core, halved (the table quotes 2:4 sparsity)",
    ),
    GPUProfile("RTX 3060 12GB", "RTX 3060", 12288 * MIB, 25.5e12, _GA10X),
    GPUProfile("RTX 4070 12GB", "RTX 4070", 12282 * MIB, 58e12, _ADA),
    GPUProfile("RTX 4080 16GB", "RTX 4080", 16376 * MIB, 97e12, _ADA),
    GPUProfile("RTX 4090 24GB", "RTX 4090", 24564 * MIB, 165e12, _ADA),
    GPUProfile(
        "W7900 48GB",
        "W7900",
        49136 * MIB,
        122e12,
        "AMD Radeon PRO W7900 specifications, Peak Half Precision (FP16)",
    ),
)

# Sustained fp32 FLOP/s per CPU core that training reaches, for time
# estimates only (no MFU is reported on CPUs). Measured with `make bench` on
# this project's 2-core AMD EPYC (docs/bench-data/cpu/tiny_step_20261124-163026.json):
# the 7.2M-parameter gpt2-tiny-shakespeare at 3,063 tokens/s x 43.7 MFLOP/token
# = 134 GFLOP/s on 2 cores with the linear layers on oneDNN (CPU_LINEAR_BACKEND's
# default; 104 on MKL), about 65 per core. The 0.8M-parameter shakespeare-char
# model reaches 82 per core, so small models finish sooner than estimated.
CPU_FLOPS_PER_CORE = 65e9


@dataclass(frozen=True)
class DeviceInfo:
    kind: str  # "cuda", "mps" or "cpu" (torch.device type; ROCm is "cuda")
    name: str
    memory_bytes: int | None
    bf16: bool
    peak_flops_16bit: float | None
    backend: str = ""  # "cuda", "rocm", "mps" or "cpu"
    cores: int | None = None  # CPU threads torch uses (CPU only)

    @property
    def sustained_flops(self) -> float | None:
        """FLOP/s a CPU sustains in training (CPU_FLOPS_PER_CORE x threads)."""
        return CPU_FLOPS_PER_CORE * self.cores if self.kind == "cpu" and self.cores else None


def match_profile(name: str, memory_bytes: int | None = None) -> GPUProfile | None:
    """The known GPU whose name stem is in `name`: the longest such stem (the
    card variant, "H100 NVL" before "H100"), and among equal stems (A100 40
    and 80 GB) the one whose memory is nearest memory_bytes."""
    found = [p for p in KNOWN_GPUS if p.match.lower() in name.lower()]
    if not found:
        return None
    longest = max(len(p.match) for p in found)
    found = [p for p in found if len(p.match) == longest]
    if memory_bytes is None:
        return found[0]
    return min(found, key=lambda p: abs(p.memory_bytes - memory_bytes))


def profile(name: str) -> GPUProfile:
    """A known GPU by its table name ("H100 80GB") or stem ("h100")."""
    for p in KNOWN_GPUS:
        if name.lower() in (p.name.lower(), p.name.lower().replace(" ", "")):
            return p
    found = match_profile(name)
    if found is None:
        raise ValueError(f"unknown GPU '{name}'; known: {', '.join(p.name for p in KNOWN_GPUS)}")
    return found


def profile_info(p: GPUProfile) -> DeviceInfo:
    """A DeviceInfo for a known GPU that is not present (estimates, tests)."""
    return DeviceInfo("cuda", p.name, p.memory_bytes, p.bf16, p.peak_flops_16bit, "cuda")


def cpu_info() -> DeviceInfo:
    threads = torch.get_num_threads()
    name = f"CPU ({os.cpu_count()} cores, {threads} threads)"
    return DeviceInfo("cpu", name, _ram_bytes(), True, None, "cpu", threads)


def describe_device(device: torch.device) -> DeviceInfo:
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        known = match_profile(props.name, props.total_memory)
        backend = "rocm" if getattr(torch.version, "hip", None) else "cuda"
        return DeviceInfo(
            "cuda",
            props.name,
            props.total_memory,
            torch.cuda.is_bf16_supported(),
            known.peak_flops_16bit if known else None,
            backend,
        )
    if device.type == "mps":
        memory = None
        try:  # unified memory: what Metal recommends one process use
            memory = int(torch.mps.recommended_max_memory())
        except (AttributeError, RuntimeError):
            pass
        return DeviceInfo("mps", "Apple MPS", memory, False, None, "mps")
    return cpu_info()


def _ram_bytes() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return None
