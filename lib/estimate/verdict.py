"""Whether a run can train here at all, by `make estimate`'s own figures: the
memory it needs against the device's, and its time on the device. A plain
`make` refuses a run that does not fit or would take more than a day here
(a GPU configuration started on a CPU), before it builds the model; YES=1
trains it anyway."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lib.estimate.memory import GIB, configured_device, estimate_memory
from lib.estimate.report import _duration
from lib.estimate.timing import estimate_seconds

if TYPE_CHECKING:
    from lib.config.run_config import RunConfig

DAY_S = 24 * 3600
TINY = "gpt2-tiny-shakespeare"  # what a CPU trains in minutes


@dataclass(frozen=True)
class Verdict:
    device: str  # "CPU RAM (here)", "H100 SXM 80GB"
    kind: str  # cpu, cuda, mps
    needs_bytes: int
    has_bytes: int | None  # None: unknown
    seconds: float | None  # None: unknown

    @property
    def fits(self) -> bool:
        return self.has_bytes is None or self.needs_bytes <= self.has_bytes

    @property
    def days(self) -> bool:
        return self.seconds is not None and self.seconds > DAY_S

    def figures(self) -> str:
        """ "needs 34.4 GiB of 23.5 GiB; about 12177.9 h" as `make estimate` states it."""
        memory = f"needs {self.needs_bytes / GIB:.1f} GiB" + (
            f" of the {self.has_bytes / GIB:.1f} GiB here" if self.has_bytes else ""
        )
        return f"{memory}, and would train for about {_duration(self.seconds)}"

    def problem(self) -> str | None:
        """The refusal's paragraph, or None when the run can train here."""
        if self.fits and not self.days:
            return None
        why = " and ".join(
            [
                *([] if self.fits else ["does not fit in memory"]),
                *(["would take days"] if self.days else []),
            ]
        )
        device = "this CPU" if self.kind == "cpu" else f"this {self.device}"
        cpu = (
            f"; it is meant for a GPU (`make estimate GPU=H100` sizes it there). On this "
            f"machine a tiny defconfig trains in minutes: `make defconfig-{TINY} && make`"
            if self.kind == "cpu"
            else ""
        )
        return (
            f"this run {why} on {device}: `make estimate` says it {self.figures()}{cpu}. "
            f"Shorten or shrink it (SCALE_ITERS=, BATCH_SIZE=, a smaller model), or train "
            f"it anyway with YES=1."
        )


def device_problem(run: RunConfig) -> str | None:
    """The one paragraph for a run configured for a device this machine lacks
    (a GPU-only import on a CPU), said before a run folder is made."""
    from lib.speed.precision import resolve_device

    try:
        resolve_device(run.DEVICE)
    except RuntimeError as err:
        return (
            f"{err}. This configuration is meant for a GPU: `make estimate GPU=H100` sizes it "
            f"for one; to try it on this machine, set DEVICE=cpu and shrink it (docs/"
            f'configuration.md, "A knlp experiment on a CPU"), or train a tiny defconfig: '
            f"`make defconfig-{TINY} && make`."
        )
    return None


def here(run: RunConfig, info: Any = None) -> Verdict:
    """`make estimate`'s figures for the device the run would use."""
    info = info or configured_device(run)
    est = estimate_memory(run, None, device_info=info)
    return Verdict(
        device="CPU RAM (here)" if info.kind == "cpu" else info.name,
        kind=info.kind,
        needs_bytes=est.required_bytes(),
        has_bytes=info.memory_bytes,
        seconds=estimate_seconds(run, info),
    )


def refusal(run: RunConfig, anyway: bool) -> str | None:
    """What `make` says instead of starting a new run here, or None: the device
    is missing, or (unless `anyway`, YES=1) the estimate says it cannot train
    here. A configuration the estimator cannot size is not refused by it."""
    missing = device_problem(run)
    if missing or anyway:
        return missing
    try:
        return here(run).problem()
    except (ValueError, KeyError):  # an estimator gap never blocks a run
        return None
