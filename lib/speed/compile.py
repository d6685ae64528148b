"""torch.compile: how it runs (COMPILE_MODE, COMPILE_REGIONAL), the compiled
forward, whether a run is compiled (CompileState) and the fallback to eager
when compiling fails (CompileOff, COMPILE_STRICT).

torch.compile is lazy: it compiles, and may fail, on the first call. The
trainer guards its first steps (lib/train/fallback.py) and, when a compiled
step fails, takes a CompileOff (unless COMPILE_STRICT), which puts the step
back on its eager forward for good; the log and metrics.json say which ran.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import torch

if TYPE_CHECKING:
    from lib.config.symbols import Speed

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
    def from_speed(cls, s: Speed) -> CompileOptions:
        return cls(s.COMPILE_MODE, s.COMPILE_REGIONAL)

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
    takes CompileOff (eager: the units untouched)."""
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
    forward the fallback returns to (CompileState.off) compiles nothing.
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


class CompileState:
    """Whether a run's forward is compiled, and how that went: `forward` is
    what runs, the `eager` forward or its torch.compile; `compiled` (forward
    is the compiled one), `proven` (no compiled step is still to prove itself:
    compile off, a compiled step ran, or it fell back) and `error` (why it
    fell back to eager). TrainStep (lib/train/step.py) holds one."""

    def __init__(self, eager: Callable):
        self.eager: Callable = eager
        self.forward: Callable = eager
        self.compiled = False
        self.proven = True
        self.error: str | None = None

    def use(self, compiled: Callable) -> None:
        """Run `compiled` (torch.compile of the eager forward) from the next step;
        it compiles, and may fail, on its first call."""
        self.forward, self.compiled, self.proven = compiled, True, False

    def ran(self) -> bool:
        """Note that a step completed: True when it was the first compiled one."""
        first = not self.proven
        self.proven = True
        return first

    def off(self, error: str) -> None:
        """Back to the eager forward for good, because of `error`."""
        self.forward, self.compiled, self.proven = self.eager, False, True
        self.error = error


_BANNER = "!" * 72


class _Step(Protocol):
    @property
    def compile(self) -> CompileState: ...


class _Stack(Protocol):  # lib/train/build.py's Training
    @property
    def step(self) -> _Step: ...


Plan = TypeVar("Plan")
Loaders = TypeVar("Loaders")
Stack = TypeVar("Stack", bound=_Stack)


@dataclass(frozen=True)
class CompileOff:
    """Continue with the eager model: one of lib/train/fallback.py's decisions.
    event: "compile_failed" (the compiler failed) or "oom_fallback" (out of
    memory while compiled)."""

    event: str
    error: str

    def record(self) -> dict[str, Any]:
        """The metrics.json event's fields (after its step)."""
        extra = {"action": "eager"} if self.event == "oom_fallback" else {}
        return {"event": self.event, "error": self.error, **extra}

    def apply(self, plan: Plan, loaders: Loaders, training: Stack) -> tuple[Plan, Loaders, Stack]:
        """The same plan and loaders; the stack with its step back on the eager forward."""
        training.step.compile.off(self.error)
        return plan, loaders, training

    def message(self) -> str:
        if self.event == "oom_fallback":
            return (
                f"out of memory while compiling or in the first steps: retrying without "
                f"torch.compile (TRAIN_OOM_FALLBACK)\n{self.error}"
            )
        return (
            f"{_BANNER}\nWARNING: torch.compile FAILED; continuing in EAGER mode "
            f"(set CONFIG_COMPILE_STRICT=y to stop instead)\n{self.error}\n{_BANNER}"
        )
