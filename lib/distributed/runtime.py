"""Several processes: torchrun launch, process group, DDP/FSDP, rank-0 duties.

`make` with GPT2_USE_DDP relaunches scripts/train.py under torchrun
(torchrun_command): GPT2_NUM_GPUS processes per machine, DIST_NNODES
machines meeting at DIST_RDZV_ENDPOINT (c10d rendezvous). Each process
reads RANK / LOCAL_RANK / WORLD_SIZE from torchrun's environment
(from_environment) and gets a DistEnv; a single process gets one whose
collectives are no-ops, so the trainer has one code path.

Division of labour:
* data: every rank draws the same global micro-batch offsets and keeps its
  slice (lib/data/loader.py), so a step sees exactly what one process with
  a world-size times larger micro-batch would see;
* gradients: DDP averages them; micro-batches before the last of an
  accumulation run under no_sync, so the all-reduce happens once per step;
* losses for logging, divergence and validation are averaged over ranks,
  and stop decisions (time limit) agreed, so every rank takes the same path;
* rank 0 alone logs, writes metrics.json and checkpoints; checkpoints hold
  every rank's RNG state, so a resumed run continues exactly.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist
from torch import nn

if TYPE_CHECKING:
    from lib.config.symbols import Distributed, Speed


@dataclass(frozen=True)
class DistEnv:
    rank: int = 0
    local_rank: int = 0
    world_size: int = 1
    strategy: str = "ddp"  # "ddp" or "fsdp"

    @property
    def active(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def place(self, device: torch.device) -> torch.device:
        """This rank's device: cuda:<local rank> on GPUs."""
        if device.type == "cuda" and self.active:
            torch.cuda.set_device(self.local_rank)
            return torch.device("cuda", self.local_rank)
        return device

    def wrap(self, model: nn.Module, device: torch.device) -> nn.Module:
        """The module to call for forward passes (the model itself when alone)."""
        if not self.active:
            return model
        if self.strategy == "fsdp":
            from torch.distributed.fsdp import fully_shard

            for block in model.blocks():  # model: a LanguageModel
                fully_shard(block)
            return fully_shard(model)
        ids = [device.index] if device.type == "cuda" else None
        return nn.parallel.DistributedDataParallel(model, device_ids=ids)

    def sync(self, module: nn.Module) -> Callable[[bool], contextlib.AbstractContextManager]:
        """sync(last_micro_batch) -> context: skip the gradient all-reduce
        except on the last micro-batch of an accumulation."""
        if not self.active:
            return lambda last: contextlib.nullcontext()
        if self.strategy == "fsdp":

            def fsdp_sync(last: bool) -> contextlib.AbstractContextManager:
                module.set_requires_gradient_sync(last)
                return contextlib.nullcontext()

            return fsdp_sync
        return lambda last: contextlib.nullcontext() if last else module.no_sync()

    def mean(self, value: float) -> float:
        if not self.active:
            return value
        t = torch.tensor([value], dtype=torch.float64, device=_comm_device())
        dist.all_reduce(t)
        return t.item() / self.world_size

    def any(self, flag: bool) -> bool:
        if not self.active:
            return flag
        t = torch.tensor([int(flag)], device=_comm_device())
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return bool(t.item())

    def gather(self, obj: Any) -> list[Any]:
        if not self.active:
            return [obj]
        out: list[Any] = [None] * self.world_size
        dist.all_gather_object(out, obj)
        return out

    def broadcast(self, obj: Any) -> Any:
        if not self.active:
            return obj
        box = [obj]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def follow_rank0(self, open_run: Callable[[], tuple], load: Callable[[Any], Any]) -> tuple:
        """(run, run folder, checkpoint state): rank 0
        opens the run (creating its folder), the others receive the run and the
        folder and read the checkpoint from it (a shared filesystem across
        machines, for resuming)."""
        opened = open_run() if self.is_main else (None, None, None)
        run, run_dir, resumed = self.broadcast((opened[0], opened[1], opened[2] is not None))
        state = (
            opened[2] if self.is_main else (load(run_dir / "ckpt_latest.pt") if resumed else None)
        )
        return run, run_dir, state

    def for_run(self, d: Distributed) -> DistEnv:
        """This env with the run's DIST_STRATEGY."""
        return replace(self, strategy=d.DIST_STRATEGY) if self.active else self

    def main_first(self, fn: Callable[[], Any]) -> Any:
        """fn on rank 0, then on the others (e.g. preparing data once)."""
        if self.is_main:
            result = fn()
        self.barrier()
        return result if self.is_main else fn()

    def barrier(self) -> None:
        if self.active:
            dist.barrier()

    def seed_ranks(self, seed: int) -> None:
        """After the (identical) initialisation: a different RNG stream per rank,
        so ranks draw different dropout masks. Alone: nothing changes."""
        if self.active:
            torch.manual_seed(seed + self.rank)

    def states(self, model: nn.Module, optimizer: torch.optim.Optimizer) -> tuple[dict, dict]:
        """Full (unsharded) model and optimizer state dicts, the same as one
        process would save; FSDP gathers them (a collective, on every rank)."""
        if self.active and self.strategy == "fsdp":
            from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict

            return get_state_dict(
                model, optimizer, options=StateDictOptions(full_state_dict=True, cpu_offload=True)
            )
        return model.state_dict(), optimizer.state_dict()

    def load_states(
        self,
        model: nn.Module,
        optimizer: torch.optim.Optimizer,
        model_state: dict,
        optimizer_state: dict,
    ) -> None:
        if self.active and self.strategy == "fsdp":
            from torch.distributed.checkpoint.state_dict import StateDictOptions, set_state_dict

            set_state_dict(
                model,
                optimizer,
                model_state_dict=model_state,
                optim_state_dict=optimizer_state,
                options=StateDictOptions(full_state_dict=True),
            )
            return
        model.load_state_dict(model_state)
        optimizer.load_state_dict(optimizer_state)


SINGLE = DistEnv()
BACKEND_VARIABLE = "KCONFIG_LLM_DIST_BACKEND"  # relaunch -> the torchrun processes


def _comm_device() -> torch.device:
    if dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def backend(d: Distributed, s: Speed) -> str:
    choice = d.DIST_BACKEND
    if choice != "auto":
        return choice
    uses_gpu = s.DEVICE == "cuda" or (s.DEVICE == "auto" and torch.cuda.is_available())
    return "nccl" if uses_gpu else "gloo"


def from_environment() -> DistEnv:
    """The DistEnv torchrun set up (initialising the process group), or SINGLE.
    The backend is the one relaunch chose, else NCCL where CUDA is present."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return SINGLE
    if not dist.is_initialized():
        chosen = os.environ.get(BACKEND_VARIABLE) or (
            "nccl" if torch.cuda.is_available() else "gloo"
        )
        dist.init_process_group(chosen, timeout=datetime.timedelta(minutes=30))
    return DistEnv(int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", "0")), world)


def teardown() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()


class QuietLog:
    """The log of ranks other than 0: they train silently."""

    def __call__(self, message: str = "") -> None:
        pass

    def close(self) -> None:
        pass


def relaunch(d: Distributed, s: Speed, script: str, args: list[str]) -> None:
    """Replace this process by torchrun running `script` with the same
    arguments; rank 0 then opens (or creates) the run folder."""
    cmd = torchrun_command(d, script, args)
    os.environ[BACKEND_VARIABLE] = backend(d, s)
    print("launching: " + " ".join(cmd[2:]), flush=True)
    os.execv(cmd[0], cmd)


def torchrun_command(d: Distributed, script: str, args: list[str]) -> list[str]:
    """`python -m torch.distributed.run ...` for this run (the torchrun CLI)."""
    nodes, gpus = d.DIST_NNODES, d.GPT2_NUM_GPUS
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        f"--nproc-per-node={gpus}",
        f"--nnodes={nodes}",
    ]
    if nodes > 1:
        if not d.DIST_RDZV_ENDPOINT:
            raise ValueError(
                f"CONFIG_DIST_NNODES={nodes} needs CONFIG_DIST_RDZV_ENDPOINT "
                f"(host:port of the rendezvous, reachable from every machine)"
            )
        cmd += [
            "--rdzv-backend=c10d",
            f"--rdzv-endpoint={d.DIST_RDZV_ENDPOINT}",
            f"--rdzv-id={d.DIST_RDZV_ID}",
        ]
    else:
        cmd.append("--standalone")
    return cmd + [script, *args]
