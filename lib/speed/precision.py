"""The device a run uses (DEVICE) and its numeric precision (MIXED_PRECISION,
MIXED_PRECISION_DTYPE): the autocast dtype and the gradient scaler.

Every choice made here (auto device, auto dtype) is returned with a reason so
the trainer can print and record it. What the device is and can do (its name,
memory, bf16) is lib/hardware/devices.py's.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from lib.hardware.devices import describe_device

if TYPE_CHECKING:
    from lib.config.symbols import Speed

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


@dataclass(frozen=True)
class Precision:
    device: torch.device
    dtype: str  # "bf16", "fp16" or "fp32"
    reason: str

    def autocast(self) -> contextlib.AbstractContextManager:
        if self.dtype == "fp32":
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=DTYPES[self.dtype])

    def grad_scaler(self) -> torch.amp.GradScaler:
        # Only fp16 needs loss scaling; a disabled scaler is a transparent no-op.
        return torch.amp.GradScaler(self.device.type, enabled=self.dtype == "fp16")


def resolve_device(choice: str) -> torch.device:
    """DEVICE choice -> torch.device; an unavailable explicit choice is an error."""
    if choice == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    if choice == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(
            "CONFIG_DEVICE_CUDA is set but no CUDA or ROCm device is visible "
            "to PyTorch; use DEVICE=cpu or DEVICE=auto"
        )
    if choice == "mps" and not torch.backends.mps.is_available():
        raise RuntimeError("CONFIG_DEVICE_MPS is set but MPS is not available; use DEVICE=cpu")
    return torch.device(choice)


def resolve_precision(s: Speed, device: torch.device) -> Precision:
    bf16 = device.type == "cuda" and describe_device(device).bf16
    return Precision(device, *choose_dtype(s, device.type, bf16))


def choose_dtype(s: Speed, kind: str, bf16: bool) -> tuple[str, str]:
    """(dtype, reason) for a device kind ("cuda", "cpu", "mps") and whether it
    has bf16; shared by the trainer and the memory estimate."""
    if not s.MIXED_PRECISION:
        return "fp32", "CONFIG_MIXED_PRECISION is off"
    wanted = s.MIXED_PRECISION_DTYPE
    assert wanted is not None  # visible whenever MIXED_PRECISION is on
    if wanted != "auto":
        if kind == "cpu" and wanted == "fp16":
            raise RuntimeError(
                "fp16 autocast with a gradient scaler is not supported on the "
                "CPU; choose bf16 or auto (CONFIG_MIXED_PRECISION_DTYPE_*)"
            )
        return wanted, "as configured"
    if kind != "cuda":
        return "fp32", f"auto: fp32 on {kind} (bf16 is a choice: CONFIG_MIXED_PRECISION_DTYPE_BF16)"
    if bf16:
        return "bf16", "auto: the GPU supports bf16"
    return "fp16", "auto: the GPU lacks bf16; fp16 with a gradient scaler"
