"""Monitoring: GPU and process load sampled in the background during a run.

build_monitor(m, device, run_dir, log) (m: the Monitor section, run.monitor) picks
the backends: NVML on NVIDIA GPUs (lib/observe/monitor/nvml.py), rocm-smi on AMD
ones (rocm.py), and always the process's own RSS and CPU use (proc.py). A GPU run
writes gpu_stats.json; a run without GPU readings (CPU, MPS, or a GPU without
NVML/rocm-smi) writes cpu_stats.json, with the same schema. The trainer starts it,
stops it, and puts write()'s summary into metrics.json under "monitor".
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lib.observe.monitor.nvml import NvmlSampler
from lib.observe.monitor.proc import ProcSampler
from lib.observe.monitor.recorder import FIELDS, Monitor, MonitorUnavailable, NullMonitor
from lib.observe.monitor.rocm import RocmSmiSampler

if TYPE_CHECKING:
    from lib.config.symbols import Monitor as MonitorSettings

GPU_FILE, CPU_FILE = "gpu_stats.json", "cpu_stats.json"

__all__ = [
    "FIELDS",
    "Monitor",
    "MonitorUnavailable",
    "NullMonitor",
    "build_monitor",
    "gpu_sampler",
    "physical_index",
]


def physical_index(index: int, env: str) -> int:
    """The driver's number of the index-th visible GPU, given a *_VISIBLE_DEVICES list."""
    visible = [v.strip() for v in os.environ.get(env, "").split(",") if v.strip()]
    if index < len(visible) and visible[index].isdigit():
        return int(visible[index])
    return index


def gpu_sampler(device: Any) -> NvmlSampler | RocmSmiSampler:
    """The GPU backend for a torch device; MonitorUnavailable if it has none."""
    import torch

    if device.type != "cuda":
        raise MonitorUnavailable(f"device {device.type} has no GPU readings")
    index = device.index if device.index is not None else torch.cuda.current_device()
    if torch.version.hip:
        env = (
            "HIP_VISIBLE_DEVICES" if "HIP_VISIBLE_DEVICES" in os.environ else "CUDA_VISIBLE_DEVICES"
        )
        return RocmSmiSampler(physical_index(index, env))
    try:
        uuid = "GPU-" + str(torch.cuda.get_device_properties(index).uuid)
    except Exception:  # older torch, or a build without CUDA: use the index
        uuid = None
    return NvmlSampler(physical_index(index, "CUDA_VISIBLE_DEVICES"), uuid)


def build_monitor(
    m: MonitorSettings,
    device: Any,
    run_dir: Path,
    log: Callable[[str], None] = print,
    main: bool = True,
) -> Monitor | NullMonitor:
    """The run's monitor; only the main process of a distributed run samples (its own GPU)."""
    if not m.MONITOR or not main:
        return NullMonitor()
    samplers: list[Any] = []
    try:
        gpu = gpu_sampler(device)
        samplers.append(gpu)
        backend, name, file = gpu.backend, gpu.device_name, GPU_FILE
    except MonitorUnavailable as err:
        if device.type == "cuda":
            log(f"monitor: no GPU readings ({err}); sampling the process only")
        backend, name, file = "proc", "process", CPU_FILE
    samplers.append(ProcSampler())
    return Monitor(Path(run_dir) / file, m.MONITOR_INTERVAL_S, samplers, backend, name, log)
