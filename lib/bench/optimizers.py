"""Optimizer cost: AdamW vs AdamWSPAM vs AdamWPrune on the configured model.

For each optimizer, on identical copies of the model and the same synthetic
batches (alternating rounds, warm-up excluded):
- the full training step (forward, backward, optimizer, masks), the figure
  that decides throughput;
- optimizer.step() alone, on fixed gradients;
- for AdamWPrune, applying the masks (every step) and recomputing them (every
  PRUNING_FREQUENCY steps), amortised over the update interval.
AdamW and AdamWSPAM run as OPTIMIZER_IMPL says (auto: fused AdamW,
multi-tensor AdamWSPAM); with OPTIMIZER_IMPL=fused the compiled AdamWSPAM
step is timed too, as "adamwspam_fused" (compiled on its first call, in the
warm-up). SPAM uses the paper's settings (theta 5000, reset every 500, warmup 150) but
clips from call 2 on (a run skips clipping in 20 calls out of 500, a bench of
a few dozen calls would skip most), and AdamWPrune the configured variant
(bitter7 by default), so the figures describe the methods rather than one
run's tuning. The run's speed options (lib/speed/apply.py: head loss,
float8, attention kernel, CPU linear kernel, TF32) apply to every copy of the
model as the trainer applies them, and are recorded ("speed"); the model is
not compiled here.
"""

from __future__ import annotations

import copy
import functools
import statistics
from typing import TYPE_CHECKING, Any

import torch

from lib.bench.step import bench_setup, median_seconds
from lib.optim import optimizer_impl
from lib.optim.spam import AdamWSPAM
from lib.optim.spam_build import foreach_arg
from lib.optim.torch_optims import adamw_impl
from lib.prune.pruner import Pruner
from lib.train.step import TrainStep

if TYPE_CHECKING:
    from lib.config.run_config import RunConfig
    from lib.config.symbols import Optim, Prune

NAMES = ("adamw", "adamwspam", "adamwprune")


def names(s: Optim) -> tuple[str, ...]:
    """The optimizers timed: NAMES, and the compiled SPAM step when OPTIMIZER_IMPL=fused."""
    return NAMES + (("adamwspam_fused",) if s.OPTIMIZER_IMPL == "fused" else ())


def _optimizer(
    name: str, model: torch.nn.Module, device: torch.device, impl: str = "auto"
) -> torch.optim.Optimizer:
    groups = model.param_groups(0.1)
    if name.startswith("adamwspam"):
        return AdamWSPAM(
            groups,
            lr=1e-4,
            betas=(0.9, 0.95),
            eps=1e-8,
            theta=5000.0,
            interval=500,
            warmup_steps=150,
            clip_skip_steps=2,
            foreach=foreach_arg(impl),
            fused=name == "adamwspam_fused",
        )
    return torch.optim.AdamW(
        groups, lr=1e-4, betas=(0.9, 0.95), eps=1e-8, **adamw_impl(impl, device)
    )


def _pruner(s: Prune, model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> Pruner:
    # Warmup 0 and a far ramp end keep masks updating every PRUNING_FREQUENCY steps
    # throughout the timed window, so the amortised cost is really measured.
    return Pruner(
        model.prunable(),
        method="state",
        target=0.5,
        warmup=0,
        ramp_end=10**9,
        frequency=s.PRUNING_FREQUENCY,
        schedule="linear",
        scope="global",
        optimizer=optimizer,
        variant=s.ADAMWPRUNE_VARIANT,
    )


def run_optimizer_bench(run: RunConfig, steps: int = 10, rounds: int = 3) -> dict[str, Any]:
    setup = bench_setup(run)
    device, next_batch = setup.device, setup.next_batch
    # The run's model as the trainer builds it, speed options applied: each copy inherits them.
    precision, base, speed = setup.training.precision, setup.training.model, setup.training.speed
    frequency = run.prune.PRUNING_FREQUENCY
    setups = {}
    timed = names(run.optim)
    for name in timed:
        model = copy.deepcopy(base)
        opt = _optimizer(name, model, device, run.optim.OPTIMIZER_IMPL)
        pruner = _pruner(run.prune, model, opt) if name == "adamwprune" else None
        setups[name] = TrainStep(
            model,
            opt,
            precision,
            run.GPT2_GRADIENT_ACCUMULATION,
            run.TRAIN_GRAD_CLIP,
            pruner,
            eager=speed.forward(model),
        )
    counters = {name: 0 for name in timed}

    def full_step(name: str) -> None:
        counters[name] += 1
        setups[name](next_batch, 1e-4, counters[name])

    for name in timed:  # warm-up, also fills the optimizer state (and compiles)
        for _ in range(2):
            full_step(name)
    full: dict[str, list[float]] = {name: [] for name in timed}
    for _ in range(rounds):
        for name in timed:
            full[name].append(median_seconds(functools.partial(full_step, name), steps, device))
    result = {
        "device": str(device),
        "dtype": precision.dtype,
        "frequency": frequency,
        "params": sum(p.numel() for p in base.parameters()),
        "prunable": sum(p.numel() for _, p in base.prunable()),
    }
    for name in timed:
        result[name] = {
            "full_step_ms": 1000 * statistics.median(full[name]),
            "optimizer_step_ms": 1000 * _optimizer_only(setups[name], steps, device),
            "impl": optimizer_impl(setups[name].optimizer),
        }
    result["adamwprune"].update(_mask_costs(setups["adamwprune"].pruner, frequency, steps, device))
    return {**_ratios(result), "speed": speed.record()}


def _optimizer_only(step: TrainStep, repeats: int, device: torch.device) -> float:
    """optimizer.step() on fixed random gradients (the pruner is not involved)."""
    gen = torch.Generator().manual_seed(1)
    for p in step.model.parameters():
        p.grad = (torch.randn(p.shape, generator=gen) * 1e-3).to(device)
    seconds = median_seconds(step.optimizer.step, repeats, device)
    step.optimizer.zero_grad(set_to_none=True)
    return seconds


def _mask_costs(
    pruner: Pruner, frequency: int, repeats: int, device: torch.device
) -> dict[str, float]:
    on_cycle = frequency * 1000  # a step with a mask update (then the masks are applied)
    update_s = median_seconds(lambda: pruner.after_step(on_cycle), max(3, repeats // 3), device)
    # After an update some weights are pruned, so applying the masks does real work.
    # A step with no mask update: under an Adam-family optimizer nothing to do
    # (Pruner.after_step), else the masks are applied.
    off_cycle = frequency * 1000 + 1
    apply_s = median_seconds(lambda: pruner.after_step(off_cycle), repeats, device)
    return {
        "mask_apply_ms": 1000 * apply_s,
        "mask_update_ms": 1000 * update_s,
        "mask_update_amortised_ms": 1000 * update_s / frequency,
    }


def _ratios(r: dict[str, Any]) -> dict[str, Any]:
    adamw = r["adamw"]
    for name in [n for n in r if isinstance(r[n], dict) and n != "adamw"]:
        r[name]["full_step_vs_adamw"] = r[name]["full_step_ms"] / adamw["full_step_ms"]
        r[name]["optimizer_step_vs_adamw"] = (
            r[name]["optimizer_step_ms"] / adamw["optimizer_step_ms"]
        )
    prune = r["adamwprune"]
    prune["mask_update_share_of_step"] = prune["mask_update_amortised_ms"] / adamw["full_step_ms"]
    # All mask work per step, amortised: the goal is under 1 % (before_step's
    # gradient zeroing is inside the full step and not counted here).
    prune["mask_share_of_step"] = (
        prune["mask_update_amortised_ms"] + prune["mask_apply_ms"]
    ) / adamw["full_step_ms"]
    return r
