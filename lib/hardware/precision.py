"""Device and numeric precision, resolved from the RunConfig, and the
torch.compile call.

Every choice made here (auto device, auto dtype) is returned with a reason so
the trainer can print and record it. Whether a run compiled, and why it fell
back, is TrainStep's state (lib/train/step.py).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from lib.hardware.devices import describe_device

if TYPE_CHECKING:
    from lib.config.run_config import RunConfig

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


def resolve_precision(run: RunConfig, device: torch.device) -> Precision:
    bf16 = device.type == "cuda" and describe_device(device).bf16
    return Precision(device, *choose_dtype(run, device.type, bf16))


def choose_dtype(run: RunConfig, kind: str, bf16: bool) -> tuple[str, str]:
    """(dtype, reason) for a device kind ("cuda", "cpu", "mps") and whether it
    has bf16; shared by the trainer and the memory estimate."""
    if not run.MIXED_PRECISION:
        return "fp32", "CONFIG_MIXED_PRECISION is off"
    wanted = run.MIXED_PRECISION_DTYPE
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


# COMPILE_MODE value -> torch.compile's mode (None: its default).
COMPILE_MODES: dict[str, str | None] = {
    "default": None,
    "max_autotune": "max-autotune",
    "max_autotune_no_cudagraphs": "max-autotune-no-cudagraphs",
    "reduce_overhead": "reduce-overhead",
}
_CUDA_GRAPH_MODES = ("max_autotune", "reduce_overhead")


@dataclass(frozen=True)
class CompileOptions:
    """How torch.compile runs: mode (a COMPILE_MODE value) and whether each
    of the model's compile_units() is compiled alone (COMPILE_REGIONAL)."""

    mode: str = "default"
    regional: bool = False

    @classmethod
    def from_run(cls, run: RunConfig) -> CompileOptions:
        return cls(run.COMPILE_MODE or "default", bool(run.COMPILE_REGIONAL))

    def check(self, device: torch.device) -> None:
        """Refuse a mode the device cannot run, before any step."""
        if self.mode not in COMPILE_MODES:
            raise ValueError(
                f"unknown compile mode {self.mode!r}; one of {', '.join(COMPILE_MODES)}"
            )
        if self.mode in _CUDA_GRAPH_MODES and device.type != "cuda":
            raise RuntimeError(
                f"COMPILE_MODE {self.mode} captures CUDA graphs and needs a CUDA "
                f"GPU, this run is on {device.type}; choose default or "
                f"max_autotune_no_cudagraphs (CONFIG_COMPILE_MODE_*)"
            )


def compile_model(
    model: Callable,
    options: CompileOptions = CompileOptions(),
    units: list[torch.nn.Module] | None = None,
) -> Callable:
    """torch.compile of the forward `model` (the model or its DDP/FSDP
    wrapper), or with options.regional a forward that runs each of `units`
    (default: model.compile_units()) compiled. torch.compile is lazy:
    failures surface on the first call, where the trainer catches them and
    applies lib/train/fallback.py's decision (eager: the units untouched)."""
    mode = COMPILE_MODES[options.mode]
    if not options.regional:
        return torch.compile(model, mode=mode)
    if units is None:
        units = model.compile_units()  # type: ignore[attr-defined]
    return RegionalForward(model, units, mode)


class RegionalForward:
    """`forward` run with each unit's forward compiled (regional compilation).

    The compiled functions are swapped in for the call only, so the model
    itself stays eager: its state_dict keys do not change, and the eager
    forward the fallback returns to (TrainStep.compile_off) compiles nothing.
    The units of a model share their code (the blocks), so dynamo compiles
    it once and reuses it for every unit with the same shapes. A unit's own
    forward attribute (gradient checkpointing's wrapper, lib/train/recompute.py)
    is what gets compiled."""

    def __init__(self, forward: Callable, units: list[torch.nn.Module], mode: str | None):
        self.eager, self.units = forward, units
        self.compiled = [torch.compile(unit.forward, mode=mode) for unit in units]

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        own = [unit.__dict__.get("forward") for unit in self.units]
        for unit, fn in zip(self.units, self.compiled):
            unit.forward = fn
        try:
            return self.eager(*args, **kwargs)
        finally:
            for unit, previous in zip(self.units, own):
                if previous is None:
                    del unit.forward
                else:
                    unit.forward = previous
