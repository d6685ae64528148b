"""Which GPU a local matrix run starts on, and when (MATRIX_RUNS_PER_GPU).

Each run asks for a Need: its estimated bytes on a GPU (lib/estimate's
peak, plus that estimate's own allocator margin and the process's CUDA
context: what `make estimate` says one run needs of a device), whether it
must have a GPU to itself, or how many whole GPUs it takes (DDP). The
Packer places runs in the matrix's order; a run starts on GPU g when

* g carries no run that keeps its GPU to itself (DDP, or a run that must
  be alone), and fewer than N runs with MATRIX_RUNS_PER_GPU=N;
* g is empty and the run's estimate fits g's whole memory (alone, as `make
  estimate` checks it), or the estimates of the runs on g plus this one fit
  in MARGIN (90 %) of g's memory: the margin covers what estimates miss
  when several processes share a device.

Among the GPUs that qualify it takes the one with the fewest runs, then the
most room, so runs spread before they stack. A run that needs empty GPUs
(DDP, alone) holds its place in line: later runs wait until it starts, or
small runs could keep it waiting to the end; otherwise a later run that
fits may start before an earlier one that does not yet.

MATRIX_RUNS_PER_GPU=1 (the default, also when empty) is the old behaviour:
one run per GPU, no estimate needed. With more, or auto, every run is
estimated before any starts, and a run too big for every GPU is refused
with an error then. MATRIX_PARALLEL_JOBS caps the runs at a time; left at 0
it is GPUs x N, and under auto one run per CPU core (each run's Python loop
keeps one busy). Runs sharing the CPU share its cores: each gets
OMP_NUM_THREADS = cores / runs at a time, unless the user set it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lib.jobs.state import MatrixError

if TYPE_CHECKING:
    from lib.config.run_config import RunConfig
    from lib.hardware.devices import DeviceInfo

MARGIN = 0.9  # share of a GPU's memory that runs sharing it may fill
MAX_PER_GPU = 64
GIB = 2**30


@dataclass(frozen=True)
class Gpu:
    visible: str  # how CUDA_VISIBLE_DEVICES names it to a child: an index or the parent's id
    memory_bytes: int
    name: str = "GPU"


@dataclass(frozen=True)
class Need:
    """What one run asks of the GPUs."""

    bytes: int | None = None  # estimated need on one GPU; None: unknown (it then runs alone)
    alone: bool = False  # needs a GPU to itself even where its estimate is small
    gpus: int = 0  # DDP: whole GPUs it takes (0: one GPU, which it may share)
    why: str = ""  # why it runs alone, for the plan


def parse_runs_per_gpu(text: str | None) -> int | None:
    """MATRIX_RUNS_PER_GPU -> N, or None for auto; empty (or hidden) is 1."""
    word = (text or "1").strip().lower()
    if word == "auto":
        return None
    if re.fullmatch(r"[0-9]+", word) and 1 <= int(word) <= MAX_PER_GPU:
        return int(word)
    raise MatrixError(
        f'CONFIG_MATRIX_RUNS_PER_GPU="{text}": give the runs one GPU may hold, '
        f"1 to {MAX_PER_GPU}, or auto (as many as their memory estimates fit in "
        f"{MARGIN:.0%} of the GPU)"
    )


def visible_ids(count: int, env: Mapping[str, str]) -> list[str]:
    """What a child's CUDA_VISIBLE_DEVICES names each of the `count` GPUs
    this process sees by: the parent's own list where it has one (a child
    given "1" would otherwise see physical GPU 1, not the parent's second)."""
    given = [w.strip() for w in env.get("CUDA_VISIBLE_DEVICES", "").split(",") if w.strip()]
    return given[:count] if len(given) >= count else [str(i) for i in range(count)]


def inventory(run: RunConfig) -> list[Gpu]:
    """The GPUs this machine gives the matrix; none for a CPU or MPS run."""
    if run.DEVICE in ("cpu", "mps"):
        return []
    import torch  # only here: plans of CPU runs stay fast

    if not torch.cuda.is_available():
        return []
    count = torch.cuda.device_count()
    props = [torch.cuda.get_device_properties(i) for i in range(count)]
    return [Gpu(v, p.total_memory, p.name) for v, p in zip(visible_ids(count, os.environ), props)]


def _cores() -> int:
    """CPU cores this process may use: each run's Python loop keeps one busy."""
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity else os.cpu_count() or 1


def _info(gpu: Gpu) -> DeviceInfo:
    from lib.hardware.devices import DeviceInfo, match_profile

    known = match_profile(gpu.name, gpu.memory_bytes)
    return DeviceInfo(
        "cuda",
        gpu.name,
        gpu.memory_bytes,
        known.bf16 if known else True,
        known.peak_flops_16bit if known else None,
        "cuda",
    )


def need(run: RunConfig, gpu: Gpu) -> Need:
    """What `run` asks of a GPU like `gpu` (lib/estimate/memory.py)."""
    from lib.estimate import estimate_memory

    if run.GPT2_USE_DDP:
        return Need(gpus=run.distributed.GPT2_NUM_GPUS, why="DDP")
    if run.HYPER_PARAM == "auto":  # it sizes its micro-batch to the whole device
        return Need(alone=True, why="HYPER_PARAM_AUTO fills the GPU")
    info = _info(gpu)
    try:
        required = estimate_memory(run, device_info=info).required_bytes()
        if required <= gpu.memory_bytes or not run.TRAIN_OOM_FALLBACK:
            return Need(required)
        # It would run out of memory, then halve its micro-batch (lib/train/fallback.py):
        # what counts is the smallest micro-batch that ladder reaches.
        from lib.train.fallback import smaller_batch

        micro, floor = run.BATCH_SIZE, run.train.TRAIN_OOM_MIN_BATCH
        while (lower := smaller_batch(micro, floor)) is not None:
            micro = lower
        accumulation = run.BATCH_SIZE * run.GPT2_GRADIENT_ACCUMULATION // micro
        smallest = estimate_memory(
            run, batch_size=micro, accumulation=accumulation, device_info=info
        ).required_bytes()
        return Need(smallest, alone=True, why=f"fits only at micro-batch {micro} (OOM fallback)")
    except (ValueError, KeyError) as err:  # an estimator gap: the run keeps a GPU to itself
        return Need(alone=True, why=f"no memory estimate ({err})")


class Packer:
    """Places runs on GPUs (module docstring). Not thread-safe: the runner
    calls it under its own lock."""

    def __init__(
        self,
        gpus: Sequence[Gpu],
        needs: Mapping[str, Need],
        per_gpu: int | None,
        jobs: int = 0,
        margin: float = MARGIN,
    ):
        self.gpus, self.needs, self.per_gpu, self.margin = list(gpus), dict(needs), per_gpu, margin
        self.by_memory = per_gpu != 1
        if jobs <= 0:  # as many as the GPUs take; under auto one per CPU core at most
            jobs = (
                (len(self.gpus) * per_gpu if per_gpu else max(len(self.gpus), _cores()))
                if self.gpus
                else 1
            )
        self.jobs = jobs
        self.on: list[list[str]] = [[] for _ in self.gpus]  # run ids on each GPU
        self.where: dict[str, list[int]] = {}  # running run -> its GPUs

    @property
    def most_at_once(self) -> int:
        return (
            min(self.jobs, len(self.gpus) * self.per_gpu)
            if self.gpus and self.per_gpu
            else self.jobs
        )

    def problems(self) -> list[str]:
        """Runs no GPU here can hold by their estimate (checked only when packing)."""
        if not (self.gpus and self.by_memory):
            return []
        biggest = max(self.gpus, key=lambda g: g.memory_bytes)
        return [
            f"{run_id}: needs about {n.bytes / GIB:.1f} GiB by its estimate, more than "
            f"the largest GPU here ({biggest.name}, {biggest.memory_bytes / GIB:.1f} GiB)"
            for run_id, n in self.needs.items()
            if not n.gpus and n.bytes is not None and n.bytes > biggest.memory_bytes
        ]

    def check(self) -> None:
        """Raise MatrixError, before any run starts, for runs too big for every GPU."""
        too_big = self.problems()
        if too_big:
            raise MatrixError(
                "refusing to start: " + "; ".join(too_big) + ". Lower its BATCH_SIZE (GRAD_ACCUM "
                "keeps the effective batch), turn on TRAIN_GRADIENT_CHECKPOINTING, or choose "
                "HYPER_PARAM_AUTO; `make estimate` shows where the memory goes"
            )

    def next(self, waiting: Sequence[str]) -> tuple[str, dict[str, str]] | None:
        """The first waiting run that may start now and its environment, or None."""
        if len(self.where) >= self.jobs:
            return None
        for run_id in waiting:
            env = self._place(run_id)
            if env is not None:
                return run_id, env
            n = self.needs.get(run_id, Need())
            if n.gpus or n.alone or n.bytes is None or not self.by_memory:
                return None  # it waits for empty GPUs: it keeps its place in line
        return None

    def first_wave(self, run_ids: Sequence[str]) -> Packer:
        """A copy holding the runs that would start at once (the plan's view)."""
        trial = Packer(self.gpus, self.needs, self.per_gpu, self.jobs, self.margin)
        waiting = list(run_ids)
        while (picked := trial.next(waiting)) is not None:
            waiting.remove(picked[0])
        return trial

    def release(self, run_id: str) -> None:
        for g in self.where.pop(run_id, []):
            self.on[g].remove(run_id)

    def _cpu_share(self) -> dict[str, str]:
        """A CPU run's OpenMP threads when several train at once: the cores
        divided among them. Each would otherwise start one thread per core, and
        OpenMP threads outnumbering the cores spin against each other (a 40-step
        training took 175 s instead of 14 on 2 cores). A user's OMP_NUM_THREADS
        is left as it is."""
        if self.jobs <= 1 or "OMP_NUM_THREADS" in os.environ:
            return {}
        return {"OMP_NUM_THREADS": str(max(1, _cores() // self.jobs))}

    def used(self, g: int) -> int:
        return sum(self.needs.get(r, Need()).bytes or 0 for r in self.on[g])

    def _place(self, run_id: str) -> dict[str, str] | None:
        n = self.needs.get(run_id, Need())
        if any(self.needs.get(r, Need()).gpus for r in self.where) and not self.gpus:
            return None  # a DDP run on the CPU has the machine
        if n.gpus:
            return self._place_whole(run_id, n.gpus)
        if not self.gpus:
            self.where[run_id] = []
            return self._cpu_share()
        fits = [g for g in range(len(self.gpus)) if self._fits(n, g)]
        if not fits:
            return None
        g = min(fits, key=lambda g: (len(self.on[g]), -self._room(g), g))
        self.on[g].append(run_id)
        self.where[run_id] = [g]
        return {"CUDA_VISIBLE_DEVICES": self.gpus[g].visible}

    def _place_whole(self, run_id: str, count: int) -> dict[str, str] | None:
        """A DDP run: `count` empty GPUs (all of them where it asks for more);
        on the CPU, an idle machine."""
        if not self.gpus:
            if self.where:
                return None
            self.where[run_id] = []
            return {}
        empty = [g for g in range(len(self.gpus)) if not self.on[g]]
        take = min(count, len(self.gpus))
        if len(empty) < take:
            return None
        chosen = empty[:take]
        for g in chosen:
            self.on[g].append(run_id)
        self.where[run_id] = chosen
        if take == len(self.gpus):  # every GPU: the environment as it is (today's DDP launch)
            return {}
        return {"CUDA_VISIBLE_DEVICES": ",".join(self.gpus[g].visible for g in chosen)}

    def _room(self, g: int) -> float:
        return self.margin * self.gpus[g].memory_bytes - self.used(g)

    def _fits(self, n: Need, g: int) -> bool:
        here = self.on[g]
        if self.per_gpu is not None and len(here) >= self.per_gpu:
            return False
        if not here:  # alone: its estimate against the whole GPU, as `make estimate` checks
            return not self.by_memory or n.bytes is None or n.bytes <= self.gpus[g].memory_bytes
        if n.alone or n.bytes is None or not all(self._shares(r) for r in here):
            return False
        return n.bytes <= self._room(g)

    def _shares(self, run_id: str) -> bool:
        n = self.needs.get(run_id, Need())
        return not (n.gpus or n.alone) and n.bytes is not None


def build(
    base: RunConfig, configs: Mapping[str, RunConfig], gpus: Sequence[Gpu] | None = None
) -> Packer:
    """The Packer for a matrix's runs on this machine (gpus: its inventory)."""
    per_gpu = parse_runs_per_gpu(base.MATRIX_RUNS_PER_GPU)
    gpus = inventory(base) if gpus is None else list(gpus)
    if per_gpu != 1 and gpus:
        largest = max(gpus, key=lambda g: g.memory_bytes)
        needs = {r: need(c, largest) for r, c in configs.items()}
    else:  # one run per GPU: no estimate needed, only which runs take several GPUs
        needs = {
            r: Need(gpus=c.distributed.GPT2_NUM_GPUS, why="DDP") if c.GPT2_USE_DDP else Need()
            for r, c in configs.items()
        }
    return Packer(gpus, needs, per_gpu, base.MATRIX_PARALLEL_JOBS)
