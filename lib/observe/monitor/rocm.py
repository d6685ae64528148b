"""AMD GPUs through the rocm-smi command's JSON output.

rocm-smi names its readings differently across ROCm releases ("Average" or
"Current Socket" graphics package power, edge or junction temperature), so
readings are found by pattern; the edge sensor is preferred, as the closest
to NVML's GPU temperature.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess

from lib.observe.monitor.recorder import MonitorUnavailable

TIMEOUT_S = 5.0
_READINGS = (
    ("gpu_util", re.compile(r"^GPU use \(%\)$"), 1.0),
    ("memory_used_mb", re.compile(r"^VRAM Total Used Memory \(B\)$"), 1 / 2**20),
    ("power_w", re.compile(r"Graphics Package Power \(W\)$"), 1.0),
    ("temperature_c", re.compile(r"^Temperature \(Sensor edge\) \(C\)$"), 1.0),
    ("temperature_c", re.compile(r"^Temperature \(Sensor junction\) \(C\)$"), 1.0),
)


def parse_rocm_smi(text: str, index: int) -> dict[str, float]:
    """Readings of card `index` from `rocm-smi --json` output; unknown or N/A ones left out."""
    card = json.loads(text).get(f"card{index}", {})
    out: dict[str, float] = {}
    for field, pattern, scale in _READINGS:
        if field in out:
            continue
        for key, value in card.items():
            if pattern.search(key):
                try:
                    out[field] = float(value) * scale
                except (TypeError, ValueError):
                    continue  # "N/A"
                break
    return out


class RocmSmiSampler:
    backend = "rocm-smi"

    def __init__(self, index: int = 0, command: str = "rocm-smi"):
        path = shutil.which(command)
        if path is None:
            raise MonitorUnavailable(f"{command} is not on PATH")
        self.path = path
        self.index = index
        self.device_name = f"AMD GPU {index}"
        if not self.sample():
            raise MonitorUnavailable(f"{command} gave no readings for GPU {index}")

    def sample(self) -> dict[str, float]:
        args = [
            self.path,
            "-d",
            str(self.index),
            "--showuse",
            "--showpower",
            "--showtemp",
            "--showmeminfo",
            "vram",
            "--json",
        ]
        try:
            done = subprocess.run(args, capture_output=True, text=True, timeout=TIMEOUT_S)
            return parse_rocm_smi(done.stdout, self.index)
        except (OSError, subprocess.TimeoutExpired, ValueError, AttributeError):
            return {}

    def close(self) -> None:
        pass
