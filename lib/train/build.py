"""The training stack, assembled once: model -> speed options -> optimizer ->
pruner -> TrainStep.

`make` (the trainer), `make bench` (lib/bench/step.py), `make estimate`'s
measured peak (lib/bench/memory.py) and the resolved settings the tests
compare (lib/train/resolved.py) all call build_training, so what the bench
and the estimate measure is what a run trains: the same seed, speed options,
gradient checkpointing, optimizer, pruner, clip and compiled forward.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import torch

from lib.distributed.runtime import SINGLE, DistEnv
from lib.model import registry
from lib.model.meta import shapes_only
from lib.optim import build_optimizer, optimizer_impl, optimizer_log_fields
from lib.optim import custom as custom_optimizer
from lib.prune import custom as custom_pruning
from lib.prune.build import build_pruner
from lib.prune.pruner import Pruner
from lib.prune.registry import CUSTOM
from lib.run.metrics import LogField
from lib.speed.apply import AppliedSpeed, apply_speed
from lib.speed.compile import CompileOptions
from lib.speed.precision import Precision, resolve_precision
from lib.train.recompute import enable_checkpointing
from lib.train.records import optimizer_summary
from lib.train.step import TrainStep

if TYPE_CHECKING:
    from lib.config.run_config import RunConfig
    from lib.model.interface import LanguageModel


@dataclass
class Training:
    """The assembled parts. `step.compile.forward` is what runs: the eager forward (the
    model or its DDP/FSDP wrapper, under the attention backend) or, with
    COMPILE_MODEL, its torch.compile until a fallback turns it off."""

    config: Any  # the family's model config
    model: LanguageModel
    precision: Precision
    speed: AppliedSpeed
    optimizer: torch.optim.Optimizer
    pruner: Pruner | None
    step: TrainStep
    # The researcher's own code, by name and SHA-256: {"optimizer_custom": class,
    # keywords, file, hash} for OPTIMIZER=custom, {"pruning_custom": function, file,
    # hash} for PRUNING_METHOD=custom
    user_code: dict[str, Any] = field(default_factory=dict)

    def log_fields(self) -> dict[str, LogField]:
        """The training log line's fields each part reports for itself."""
        pruner = self.pruner.log_fields() if self.pruner is not None else {}
        model = {k: LogField(f"{v:.3f}", v) for k, v in self.model.aux_metrics().items()}
        return {**pruner, **optimizer_log_fields(self.optimizer), **model}

    def summary(self, run: RunConfig) -> dict[str, Any]:
        """metrics.json's fields on how the run went: compiled or not, and the
        optimizer's and pruner's figures (state memory, sparsity, SPAM counters)."""
        return {
            "compiled": self.step.compile.compiled,
            "compile_error": self.step.compile.error,
            **optimizer_summary(run, self.optimizer, self.pruner),
        }

    def describe(self) -> list[str]:
        compiling = "requested; compiles on the first step" if self.step.compile.compiled else "off"
        return [
            self._optimizer_line(),
            *([self._pruning_line()] if self.pruner is not None else []),
            f"torch.compile: {compiling}",
            self.speed.describe(),
        ]

    def _optimizer_line(self) -> str:
        """What steps the weights, as built: the class and its path, its own code's
        name, and which tensors decay."""
        groups = self.optimizer.param_groups
        decays = [g for g in groups if g.get("weight_decay")]
        decayed = sum(len(g["params"]) for g in decays)
        total = sum(len(g["params"]) for g in groups)
        custom = self.user_code.get("optimizer_custom")
        own = f" ({custom['class']}, your own)" if custom else ""
        decay = (
            f"weight decay {decays[0]['weight_decay']:g} on {decayed} of {total} tensors"
            if decays
            else "no weight decay"
        )
        return f"optimizer: {optimizer_impl(self.optimizer)}{own}; {decay}"

    def _pruning_line(self) -> str:
        p = self.pruner
        assert p is not None  # describe() asks only then
        custom = self.user_code.get("pruning_custom")
        own = f" ({custom['function']}, your own)" if custom else ""
        return (
            f"pruning: {p.method}{own} to {p.target:.0%} sparsity, {p.scope}, {p.schedule} "
            f"from step {p.warmup} to {p.ramp_end}, masks every {p.frequency} steps"
        )

    def state_dict(self, dist: DistEnv = SINGLE) -> dict[str, Any]:
        """The checkpoint's entries for these parts: full (unsharded) model and
        optimizer states on every rank (FSDP gathers them: a collective)."""
        model, optimizer = dist.states(self.model, self.optimizer)
        return {
            "model_config": asdict(self.config),
            "model": model,
            "optimizer": optimizer,
            "scaler": self.step.scaler.state_dict(),
            "pruner": self.pruner.state_dict() if self.pruner is not None else None,
        }

    def load_state_dict(self, state: dict[str, Any], dist: DistEnv = SINGLE) -> None:
        dist.load_states(self.model, self.optimizer, state["model"], state["optimizer"])
        self.step.scaler.load_state_dict(state["scaler"])
        if self.pruner is not None:
            self.pruner.load_state_dict(state["pruner"])

    def record(self) -> dict[str, Any]:
        """metrics.json's fields about the model and how it trains."""
        return {
            "model_config": asdict(self.config),
            "params": sum(p.numel() for p in self.model.parameters()),
            "params_non_embedding": self.model.num_params(non_embedding=True),
            "optimizer_impl": optimizer_impl(self.optimizer),  # OPTIMIZER_IMPL as resolved
            **self.user_code,
            "init": getattr(self.config, "init_record", {"from": "scratch"}),  # gpt2/pretrained.py
            "dtype": self.precision.dtype,
            "dtype_reason": self.precision.reason,
            "speed": self.speed.record(),
            # which kernels a family chose at run time (HAMT's scan backend), if it says
            "kernels": getattr(self.model, "describe_kernels", dict)(),
        }


def build_training(
    run: RunConfig,
    device: torch.device,
    vocab_size: int,
    *,
    dist: DistEnv = SINGLE,
    warm: bool = False,
) -> Training:
    """Build the run's model on `device` from TRAIN_SEED, apply its speed options
    (`warm`: with GPU_WARMUP's passes, as training does), then gradient
    checkpointing, the DDP/FSDP wrapper, the optimizer, the pruner and the step
    (micro-batches: run.GPT2_GRADIENT_ACCUMULATION, as the batch plan set it).

    On the meta device (a description: nothing runs) the speed options, which
    check and change the device, are left at their defaults."""
    family = registry.family(run.MODEL)
    config = family.from_run_config(run, vocab_size)
    torch.manual_seed(run.TRAIN_SEED)  # identical weights on every rank and in every tool
    if device.type == "meta":  # built there: no memory, no time
        with shapes_only():
            model = family.build(config)
    else:
        model = family.build(config).to(device)
    precision = resolve_precision(run.speed, device)
    if device.type == "meta":
        speed = AppliedSpeed(compile=CompileOptions.from_speed(run.speed))
    else:  # loss implementation, float8 layers, TF32, attention kernel, compile mode
        speed = apply_speed(run.speed, model, device, precision, run.BATCH_SIZE if warm else None)
    dist.seed_ranks(run.TRAIN_SEED)  # different dropout masks per rank
    if run.TRAIN_GRADIENT_CHECKPOINTING:
        enable_checkpointing(model)
    forward = dist.wrap(model, device)  # DDP/FSDP, or the model
    optimizer = build_optimizer(run.optim, run.train.LEARNING_RATE, model, device)
    pruner = build_pruner(run.prune, model, optimizer, run.TRAIN_SEED)
    step = TrainStep(
        model,
        optimizer,
        precision,
        run.GPT2_GRADIENT_ACCUMULATION,
        run.TRAIN_GRAD_CLIP,
        pruner,
        eager=speed.forward(forward),
        sync=dist.sync(forward),
    )
    if run.COMPILE_MODEL:
        step.compile.use(speed.compiled(forward, model))
    mine = {}
    if run.OPTIMIZER == "custom":
        mine["optimizer_custom"] = custom_optimizer.describe(run.optim)
    if pruner is not None and pruner.method == CUSTOM:
        mine["pruning_custom"] = custom_pruning.describe(run.prune)
    return Training(config, model, precision, speed, optimizer, pruner, step, mine)
