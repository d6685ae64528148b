"""The whole training loop against a plain one: what the trainer adds per step.

`make bench`'s step comparison (lib/bench/step.py) times one optimizer step on
synthetic batches. This times the whole loop on the run's prepared data. Ours is
the trainer itself (lib/train/trainer.py): its loader, its step, the loss reads at
log steps, the log lines and the progress bar, the metrics bookkeeping, the
trackers and the background monitor (MONITOR), as a run has them. The plain loop
is what a researcher writes by hand, nanoGPT's: a random batch from the token file
(the memmap opened per batch), forward, backward, clip, torch.optim.AdamW,
zero_grad, and the loss read and printed every TRAIN_LOG_INTERVAL steps, into a
log file as ours writes output.log.

Neither side evaluates or writes a checkpoint inside the timed steps (both costs
are their own, and `make` reports them in the run). Rounds alternate (ours, plain,
ours, plain), so both see the same machine; each round's first steps (the trainer's
guarded first steps, the allocator's warm-up) are not timed, and each round gives
its own ratio. Both sides start from the same seed and weights.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from lib.bench.step import plain_step
from lib.data.meta import SPLIT_FILES, load_meta
from lib.data.prepared import data_dir
from lib.model import registry
from lib.optim import optimizer_impl
from lib.run.rundir import RunLog
from lib.train.build import Training
from lib.train.trainer import Trainer

if TYPE_CHECKING:
    from lib.config.run_config import RunConfig


def _timed_rest(stamps: list[float], warmup: int) -> float:
    """Seconds per step after the first `warmup` steps, from each step's end time."""
    return (stamps[-1] - stamps[warmup - 1]) / (len(stamps) - warmup)


def ours(run: RunConfig, warmup: int, steps: int, folder: Path) -> tuple[float, Training]:
    """The trainer's seconds per step over `steps` steps after `warmup`; what it trained."""
    run = replace(
        run,
        GPT2_MAX_ITERS=warmup + steps,
        GPT2_EVAL_INTERVAL=10 * (warmup + steps),  # none inside the timed steps
        TRAIN_EVAL_ITERS=1,  # the evaluation at the last step, after the timed ones
        SAVE_CHECKPOINT=False,
        # no tracker runs for a bench (their per-step cost is theirs, off by default)
        TRACKER_TENSORBOARD=False,
        TRACKER_WANDB=False,
        TRACKER_TRACKIO=False,
    )
    run_dir = Path(tempfile.mkdtemp(dir=folder))
    trainer = Trainer(run, run_dir, RunLog(run_dir / "output.log"))
    stamps: list[float] = []
    step_done = trainer.steplog.step_done

    def stamped(read: list, now: int) -> str | None:
        reason = step_done(read, now)
        stamps.append(time.perf_counter())
        return reason

    trainer.steplog.step_done = stamped  # type: ignore[method-assign]
    trainer.train()
    return _timed_rest(stamps, warmup), trainer.training


def nanogpt_batches(run: RunConfig, device: torch.device) -> Callable:
    """nanoGPT's get_batch over the prepared train split: a memmap opened per batch,
    batch_size random windows stacked, targets shifted by one."""
    folder = data_dir(run.data)
    meta = load_meta(folder)
    path, dtype = folder / SPLIT_FILES["train"], np.dtype(meta["dtype"])
    block, batch = run.GPT2_BLOCK_SIZE, run.BATCH_SIZE

    def next_batch() -> tuple[torch.Tensor, torch.Tensor]:
        data = np.memmap(path, dtype=dtype, mode="r")
        ix = torch.randint(len(data) - block, (batch,))
        x = torch.stack([torch.from_numpy(data[i : i + block].astype(np.int64)) for i in ix])
        y = torch.stack(
            [torch.from_numpy(data[i + 1 : i + 1 + block].astype(np.int64)) for i in ix]
        )
        return x.to(device), y.to(device)

    return next_batch


def plain(
    run: RunConfig, trained: Training, warmup: int, steps: int, folder: Path
) -> tuple[float, str]:
    """The plain loop's seconds per step over `steps` steps after `warmup`, on a fresh
    model of the trainer's family and config from the same seed; its optimizer."""
    device = next(trained.model.parameters()).device
    torch.manual_seed(run.TRAIN_SEED)
    model = registry.family(run.MODEL).build(trained.config).to(device)
    next_batch = nanogpt_batches(run, device)
    optimizer = torch.optim.AdamW(
        model.param_groups(run.WEIGHT_DECAY),
        lr=run.LEARNING_RATE,
        fused=device.type == "cuda",
    )
    one_step = plain_step(
        model,
        model,
        optimizer,
        trained.precision,
        run.GPT2_GRADIENT_ACCUMULATION,
        run.TRAIN_GRAD_CLIP,
    )
    stamps: list[float] = []
    with open(folder / "plain.log", "w") as log:
        for step in range(1, warmup + steps + 1):
            loss = one_step(next_batch, run.LEARNING_RATE)
            if step % run.TRAIN_LOG_INTERVAL == 0:
                print(f"iter {step}: loss {loss.item():.4f}", file=log, flush=True)
            stamps.append(time.perf_counter())
    return _timed_rest(stamps, warmup), optimizer_impl(optimizer)


def run_loop_bench(
    run: RunConfig, steps: int = 30, warmup: int = 5, rounds: int = 3
) -> dict[str, Any]:
    """Ours against the plain loop, `rounds` alternating rounds of `steps` timed steps."""
    seconds: dict[str, list[float]] = {"ours": [], "plain": []}
    optimizers: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        for _ in range(rounds):
            s, training = ours(run, warmup, steps, folder)
            seconds["ours"].append(s)
            optimizers["ours"] = optimizer_impl(training.optimizer)
            s, optimizers["plain"] = plain(run, training, warmup, steps, folder)
            seconds["plain"].append(s)
            del training
    tokens = run.derived()["tokens_per_iter"]
    result: dict[str, Any] = {
        "what": "whole training loop on the prepared data: the trainer against a plain loop",
        "steps_per_round": steps,
        "warmup_steps": warmup,
        "rounds": rounds,
        "tokens_per_iter": tokens,
        "monitor": bool(run.MONITOR),
        "log_interval": run.TRAIN_LOG_INTERVAL,
        "threads": torch.get_num_threads(),
    }
    for name, values in seconds.items():
        s = statistics.median(values)
        result[name] = {
            "ms_per_iter": 1000 * s,
            "tokens_per_sec": tokens / s,
            "optimizer": optimizers[name],
        }
    result["ours_vs_plain_time"] = result["ours"]["ms_per_iter"] / result["plain"]["ms_per_iter"]
    result["ours_vs_plain_time_rounds"] = [o / p for o, p in zip(seconds["ours"], seconds["plain"])]
    return result
