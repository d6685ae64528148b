"""Micro-batch and accumulation for a run: kept as configured (manual) or
chosen from the memory estimate (HYPER_PARAM_AUTO).

Auto keeps TARGET_EFFECTIVE_BATCH exactly: the micro-batch is the largest
divisor of the per-device batch (target / world size) whose estimated peak,
with lib/estimate/memory.py's margin and the runtime's share, fits the
device; accumulation is the quotient. A resumed run keeps what its
checkpoint ran with (the fallback ladder may have lowered it), so the data
order continues unchanged.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any

from lib.config.run_config import with_batch_plan
from lib.estimate.memory import GIB, estimate_memory

if TYPE_CHECKING:
    from lib.config.run_config import RunConfig


@dataclass(frozen=True)
class BatchPlan:
    mode: str  # "manual", "auto", "resumed" or "fallback"
    batch_size: int  # micro-batch per device
    accumulation: int
    world_size: int
    reason: str
    estimate_bytes: int | None = None
    device_bytes: int | None = None

    @property
    def effective(self) -> int:
        return self.batch_size * self.accumulation * self.world_size

    def describe(self) -> str:
        line = (
            f"batch ({self.mode}): micro-batch {self.batch_size} x accumulation "
            f"{self.accumulation} x world {self.world_size} = effective {self.effective}"
        )
        if self.estimate_bytes:
            line += f"; estimated peak {self.estimate_bytes / GIB:.2f} GiB"
            if self.device_bytes:
                line += f" of {self.device_bytes / GIB:.1f} GiB"
        return f"{line} ({self.reason})"

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "effective": self.effective}

    def rebatched(self, batch_size: int, accumulation: int, reason: str) -> BatchPlan:
        """The plan at another micro-batch (the out-of-memory fallback's): a new
        value, with the same effective batch."""
        plan = replace(
            self,
            mode="fallback",
            batch_size=batch_size,
            accumulation=accumulation,
            reason=reason,
            estimate_bytes=None,
            device_bytes=None,
        )
        if plan.effective != self.effective:
            raise ValueError(
                f"micro-batch {batch_size} x accumulation {accumulation} changes "
                f"the effective batch {self.effective}"
            )
        return plan


def divisors(n: int) -> list[int]:
    """Divisors of n, largest first."""
    small = [d for d in range(1, int(n**0.5) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]), reverse=True)


def plan_batch(
    run: RunConfig,
    device_info: Any,
    world_size: int = 1,
    vocab_size: int | None = None,
    recorded: dict[str, int] | None = None,
) -> tuple[RunConfig, BatchPlan]:
    """(the RunConfig to train with, the plan and why)."""
    if recorded:
        plan = BatchPlan(
            "resumed",
            recorded["batch_size"],
            recorded["accumulation"],
            world_size,
            "as the checkpoint ran",
        )
    elif run.HYPER_PARAM != "auto":
        plan = BatchPlan(
            "manual",
            run.BATCH_SIZE,
            run.GPT2_GRADIENT_ACCUMULATION,
            world_size,
            "BATCH_SIZE and GPT2_GRADIENT_ACCUMULATION as configured",
        )
    else:
        plan = _auto(run, device_info, world_size, vocab_size)
    return with_batch_plan(run, plan.batch_size, plan.accumulation), plan


def _auto(run: RunConfig, info: Any, world: int, vocab_size: int | None) -> BatchPlan:
    target = run.TARGET_EFFECTIVE_BATCH
    assert target is not None  # visible whenever HYPER_PARAM_AUTO
    if target % world:
        raise ValueError(
            f"CONFIG_TARGET_EFFECTIVE_BATCH={target} is not divisible by the "
            f"world size {world}: choose a multiple of {world}"
        )
    per_device = target // world
    memory = info.memory_bytes
    if memory is None:
        fallback = max(d for d in divisors(per_device) if d <= max(1, run.BATCH_SIZE))
        return BatchPlan(
            "auto",
            fallback,
            per_device // fallback,
            world,
            f"device memory unknown: largest divisor of {per_device} up to "
            f"BATCH_SIZE={run.BATCH_SIZE}",
        )
    est = None
    for size in divisors(per_device):
        est = estimate_memory(
            run, vocab_size, batch_size=size, accumulation=per_device // size, device_info=info
        )
        if est.fits(memory):
            return BatchPlan(
                "auto",
                size,
                per_device // size,
                world,
                f"largest divisor of {per_device} that fits {info.name}",
                est.total_bytes,
                memory,
            )
    assert est is not None  # divisors() is never empty: it ends with 1
    return BatchPlan(
        "auto",
        1,
        per_device,
        world,
        f"even micro-batch 1 is estimated not to fit {info.name} (needs "
        f"{est.required_bytes() / GIB:.2f} GiB with margin); trying anyway",
        est.total_bytes,
        memory,
    )
