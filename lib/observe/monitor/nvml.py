"""NVIDIA GPUs through NVML: the nvidia-ml-py package, imported as pynvml.

Each reading the GPU does not support (power on some boards, for one) is left
out of the sample rather than failing it.
"""

from __future__ import annotations

from typing import Any

from lib.observe.monitor.recorder import MonitorUnavailable


class NvmlSampler:
    backend = "nvml"

    def __init__(self, index: int = 0, uuid: str | None = None):
        try:
            import pynvml
        except ImportError:
            raise MonitorUnavailable("the nvidia-ml-py package (pynvml) is not installed") from None
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError as err:
            raise MonitorUnavailable(f"NVML cannot start: {err}") from None
        self.nvml = pynvml
        try:
            self.handle = self._handle(index, uuid)
            name = pynvml.nvmlDeviceGetName(self.handle)
        except pynvml.NVMLError as err:
            pynvml.nvmlShutdown()
            raise MonitorUnavailable(f"NVML has no GPU {uuid or index}: {err}") from None
        self.device_name = name.decode() if isinstance(name, bytes) else str(name)

    def _handle(self, index: int, uuid: str | None) -> Any:
        """By UUID when torch knows it (CUDA_VISIBLE_DEVICES renumbers GPUs, NVML does not)."""
        if uuid:
            try:
                return self.nvml.nvmlDeviceGetHandleByUUID(uuid)
            except self.nvml.NVMLError:
                pass
        return self.nvml.nvmlDeviceGetHandleByIndex(index)

    def sample(self) -> dict[str, float]:
        nvml, h = self.nvml, self.handle
        readings = {
            "gpu_util": lambda: nvml.nvmlDeviceGetUtilizationRates(h).gpu,
            "memory_used_mb": lambda: nvml.nvmlDeviceGetMemoryInfo(h).used / 2**20,
            "power_w": lambda: nvml.nvmlDeviceGetPowerUsage(h) / 1000.0,  # milliwatts
            "temperature_c": lambda: nvml.nvmlDeviceGetTemperature(h, nvml.NVML_TEMPERATURE_GPU),
        }
        out: dict[str, float] = {}
        for key, read in readings.items():
            try:
                out[key] = float(read())
            except nvml.NVMLError:
                pass  # not supported on this GPU
        return out

    def close(self) -> None:
        try:
            self.nvml.nvmlShutdown()
        except self.nvml.NVMLError:
            pass
