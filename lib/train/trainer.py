"""The training loop every model family uses.

Per optimizer step: set the LR, run GRAD_ACCUMULATION micro-batches under
autocast (loss divided by the number of micro-batches), unscale, clip, step.
Every EVAL_INTERVAL steps: validation loss, metrics.json; checkpoints when
lib/run/checkpointer.py says. Stops at MAX_ITERS, at TRAIN_MAX_TIME, on a stop signal
(SIGTERM, SIGINT, SIGUSR1; lib/run/signals.py), both at a step boundary with a checkpoint
(none with SAVE_CHECKPOINT off), or on divergence (the last good checkpoint stays).
"""
from __future__ import annotations

import math
import time
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import torch
import torch.nn.functional as F
from tqdm import tqdm

from lib.model import registry
from lib.run.atomic import remove_stale_temps
from lib.run.backup import Backup
from lib.run.checkpoint import rng_state, save_checkpoint, seed_everything, set_rng_state
from lib.run.checkpointer import Checkpointer
from lib.run.fingerprint import fingerprint
from lib.data import BatchLoader, load_meta
from lib.data.prepared import ensure_prepared
from lib.distributed.runtime import SINGLE, DistEnv
from lib.train.early_stop import EarlyStop
from lib.estimate.fit import plan_batch
from lib.eval.samples import SampleLog
from lib.bench.inference import inference_at_end
from lib.train.fallback import CompileOff, FirstSteps, retrying
from lib.hardware.devices import describe_device
from lib.run.metrics import RunMetrics, mfu, peak_memory_mb
from lib.observe.monitor import CPU_FILE, GPU_FILE, build_monitor
from lib.optim import build_optimizer, optimizer_impl, optimizer_stats
from lib.hardware.precision import compile_model, resolve_device, resolve_precision
from lib.hardware.speed import apply_speed
from lib.prune.build import build_pruner
from lib.train.recompute import enable_checkpointing
from lib.train.schedule import lr_schedule, schedule_settings
from lib.run.signals import STOP, Abandoned
from lib.train.losses import PendingLosses, divergence, logged
from lib.train.records import batch_record, optimizer_summary
from lib.train.step import TrainStep
from lib.observe.tracking import Tracker

if TYPE_CHECKING:
    from lib.config.run_config import RunConfig

# Files the run's own process writes atomically in its folder: the temporaries a
# killed write of these leaves are the run's to remove (config.txt and eval.json
# have other writers).
RUN_FILES = ("ckpt_latest.pt", "ckpt_best.pt", "metrics.json", GPU_FILE, CPU_FILE)


class Trainer:
    def __init__(self, run: RunConfig, run_dir: Path, log: Callable[[str], None],
                 resume: dict[str, Any] | None = None, dist: DistEnv = SINGLE):
        self.run_dir, self.log, self.dist = Path(run_dir), log, dist
        seed_everything(run.TRAIN_SEED)
        self.device = dist.place(resolve_device(run.DEVICE))
        self.precision = resolve_precision(run, self.device)
        data_dir = dist.main_first(lambda: ensure_prepared(run, log))
        self.meta = load_meta(data_dir)
        family = registry.family(run.MODEL)
        self.model_config = family.from_run_config(run, self.meta["vocab_size"])
        # Micro-batch and accumulation: as configured, chosen to fit (HYPER_PARAM_AUTO),
        # or as a resumed checkpoint ran them.
        run, self.batch_plan = plan_batch(run, describe_device(self.device), dist.world_size,
                                          self.meta["vocab_size"], (resume or {}).get("batch"))
        self.run = run
        self.model = family.build(self.model_config).to(self.device)
        # Loss implementation, float8 layers, TF32, attention kernel, compile mode.
        self.speed = apply_speed(run, self.model, self.device, self.precision, warm=True)
        dist.seed_ranks(run.TRAIN_SEED)  # different dropout masks per rank
        if run.TRAIN_GRADIENT_CHECKPOINTING:
            enable_checkpointing(self.model)
        forward = dist.wrap(self.model, self.device)  # DDP/FSDP, or the model
        self.optimizer = build_optimizer(run, self.model, self.device)
        self.pruner = build_pruner(run, self.model, self.optimizer)
        self.train_step = TrainStep(self.model, self.optimizer, self.precision,
                                    self.batch_plan.accumulation, run.TRAIN_GRAD_CLIP,
                                    self.pruner, eager=self.speed.forward(forward))
        self.train_step.sync = dist.sync(forward)
        block = self.model_config.block_size
        self.loaders = {split: BatchLoader(data_dir, split, self.batch_plan.batch_size, block,
                                           device=self.device, seed=run.TRAIN_SEED,
                                           rank=dist.rank, world_size=dist.world_size,
                                           pin_memory=self.speed.pin_memory)
                        for split in ("train", "val")}
        self.derived, self.checkpoints = run.derived(dist.world_size), Checkpointer.from_run(run)
        self.metrics = RunMetrics(self.run_dir / "metrics.json", self._static(),
                                  write=dist.is_main)
        self.monitor = build_monitor(run, self.device, self.run_dir, log, dist.is_main)
        self.backup = Backup.from_run(run, self.run_dir, log, dist.is_main)
        self.early_stop = EarlyStop.from_run(run)  # val loss is averaged: ranks agree
        self.tracker = Tracker(run, self.run_dir, log, dist.is_main)  # TensorBoard / W&B; off by default
        self.samples = SampleLog(run, self.run_dir, self.meta["tokenizer"], log, dist.is_main)
        self.step = 0
        self.losses = PendingLosses(dist.mean)  # read in one sync per log step (losses.py)
        self.stop_signal: str | None = None  # the signal that stopped the run
        self.abandoned = False  # stopped at once by a repeated signal: nothing saved
        if run.COMPILE_MODEL:
            compiled = compile_model(forward, self.speed.compile, self.model.compile_units())
            self.train_step.use_compiled(self.speed.forward(compiled))
        self.first_steps = FirstSteps(run, dist.active)  # compile and out-of-memory fallbacks
        if resume:
            self._restore(resume)

    # -- set-up ---------------------------------------------------------------

    def _static(self) -> dict[str, Any]:
        info = describe_device(self.device)
        return {
            "run_id": self.run_dir.name, "model": self.run.MODEL,
            "fingerprint": fingerprint(self.run),  # a matrix reuses a completed twin
            "model_config": asdict(self.model_config),
            "params": sum(p.numel() for p in self.model.parameters()),
            "params_non_embedding": self.model.num_params(non_embedding=True),
            "dataset": self.meta["dataset"], "tokenizer": self.meta["tokenizer"]["name"],
            "optimizer": self.run.OPTIMIZER, "max_iters": self.run.GPT2_MAX_ITERS,
            "optimizer_impl": optimizer_impl(self.optimizer),  # OPTIMIZER_IMPL as resolved
            "lr_schedule": schedule_settings(self.run),
            "init": getattr(self.model_config, "init_record", {"from": "scratch"}),  # gpt2/pretrained.py
            "effective_batch_size": self.derived["effective_batch_size"],
            "tokens_per_iter": self.derived["tokens_per_iter"],
            "device": info.kind, "device_name": info.name,
            "dtype": self.precision.dtype, "dtype_reason": self.precision.reason,
            "overrides": self.run.overrides, "world_size": self.dist.world_size,
            "batch_plan": self.batch_plan.as_dict(),
            "gradient_checkpointing": bool(self.run.TRAIN_GRADIENT_CHECKPOINTING),
            "speed": self.speed.record(), "checkpoints": self.checkpoints.record(),
            # which kernels a family chose at run time (HAMT's scan backend), if it says
            "kernels": getattr(self.model, "describe_kernels", dict)(),
            **batch_record(self.run, self.meta["vocab_size"], self.batch_plan, info, self.log),
        }

    def describe(self) -> None:
        s = self.metrics.static
        self.log(f"run {s['run_id']}: {s['model']} {self.model_config}")
        self.log(f"parameters: {s['params']:,} ({s['params_non_embedding']:,} without "
                 f"position embeddings)")
        self.log(f"data: {s['dataset']} / {s['tokenizer']}: {self.meta['train_tokens']:,} train "
                 f"and {self.meta['val_tokens']:,} val tokens")
        self.log(f"device: {s['device_name']}; precision {s['dtype']} ({s['dtype_reason']})")
        if s.get("kernels"):  # e.g. HAMT's scan backend, and why auto chose it
            self.log(f"kernels: {s['kernels']}")
        self.log(self.run.describe(self.dist.world_size))
        self.log(self.batch_plan.describe())
        compiling = "requested; compiles on the first step" if self.train_step.compiled else "off"
        self.log(f"torch.compile: {compiling}")
        self.log(self.speed.describe())

    # -- loop -------------------------------------------------------------------

    def train(self) -> dict[str, Any]:
        """Train to MAX_ITERS, or until a stop (module docstring)."""
        installed = STOP.install()  # train.py installed it already; a library caller may not have
        try:
            return self._train()
        finally:
            if installed:
                STOP.uninstall()

    def _train(self) -> dict[str, Any]:
        run, total = self.run, self.run.GPT2_MAX_ITERS
        started, status, reason = time.monotonic(), "completed", None
        best_loss, schedule = math.inf, lr_schedule(run)
        bar = tqdm(total=total, initial=self.step, desc="train", dynamic_ncols=True,
                   disable=not self.dist.is_main)
        self.monitor.start()
        try:
            while self.step < total:
                # Stops happen here only, between steps: the checkpoint then holds
                # exactly the state an uninterrupted run had after this step.
                late = bool(run.TRAIN_MAX_TIME) and time.monotonic() - started >= run.TRAIN_MAX_TIME
                signalled = STOP.signal is not None
                if self.dist.any(late or signalled):  # every rank stops at the same step
                    # A loss not read yet may have diverged: then no resume checkpoint.
                    reason, best_loss = self._check_losses(self.losses.read(), best_loss, bar)
                    status = "diverged" if reason else "stopped"
                    reason = reason or self._stop_reason(late, signalled, total)
                    break
                lr = schedule(self.step)
                t0 = time.perf_counter()
                self.losses.add(self.step + 1, self._step(lr), lr)
                self.step += 1
                # Losses are read (one device sync) at log and eval steps and at the
                # last one; the wait then counts in this step's time, so the totals hold.
                evaluating = self.step % run.GPT2_EVAL_INTERVAL == 0 or self.step == total
                reading = evaluating or logged(self.step, run.TRAIN_LOG_INTERVAL, total)
                read = self.losses.read() if reading else []
                self.metrics.record_step(time.perf_counter() - t0, self.derived["tokens_per_iter"])
                bar.update(1)
                reason, best_loss = self._check_losses(read, best_loss, bar)
                if reason:
                    status = "diverged"
                    break
                if evaluating or self.checkpoints.latest_due(self.step):
                    self._evaluate_and_save(evaluating)
                    if self.early_stop.reason and self.step < total:
                        reason = self.early_stop.reason  # still "completed"
                        break
        except (Abandoned, KeyboardInterrupt) as err:
            # Mid-step: nothing consistent to save; the last checkpoint stays.
            name = str(err) or "SIGINT"
            self.stop_signal, self.abandoned = name, True
            status, reason = "stopped", (f"{name} received again while stopping: stopped at once "
                                         f"without a checkpoint; resumes from the last one")
        finally:
            bar.close()
            self.monitor.stop()
        return self._finish(status, reason)

    def _step(self, lr: float) -> torch.Tensor | float:
        """One optimizer step; the first ones guarded (lib/train/fallback.py).
        Returns the loss unread (a device tensor), except in a guarded step, which
        reads it so that an asynchronous device error surfaces inside the guard."""
        if not self.first_steps.guards(self.step, self.train_step.compile_proven):
            return self.train_step(self.loaders["train"].next_batch, lr, self.step + 1)

        def attempt() -> float:
            return self.train_step(self.loaders["train"].next_batch, lr, self.step + 1).item()
        loss = retrying(attempt, self.loaders, self.optimizer, self._recover)
        if self.train_step.compile_ran():
            self.log("torch.compile: compiled model is running")
        return loss

    def _recover(self, err: Exception) -> None:
        """Apply FirstSteps' decision after a failed first step, and record it."""
        ts = self.train_step
        decision = self.first_steps.decide(err, ts.compiled, ts.compile_proven, self.batch_plan)
        if isinstance(decision, CompileOff):
            ts.compile_off(decision.error)
        else:  # SmallerBatch: the same effective batch
            plan = self.batch_plan = self.batch_plan.rebatched(
                decision.batch_size, decision.accumulation, "TRAIN_OOM_FALLBACK: out of memory")
            for loader in self.loaders.values():
                loader.batch_size = plan.batch_size
            ts.accumulation = plan.accumulation
            self.metrics.static.update(batch_record(self.run, self.meta["vocab_size"], plan,
                                                    describe_device(self.device), self.log))
        self.metrics.record_event(step=self.step, **decision.record())
        self.log(decision.message())

    def _stop_reason(self, late: bool, signalled: bool, total: int) -> str:
        """Why the loop stops: a signal (this rank's or another's) or TRAIN_MAX_TIME."""
        if self.dist.any(signalled):  # every rank asks: all took the branch above
            self.stop_signal = STOP.signal or "SIGTERM"
            who = STOP.why() if signalled else "a stop signal to another rank"
            return f"{who}: stopped after step {self.step} of {total} " + \
                self.checkpoints.stop_note(self.run_dir)
        return f"TRAIN_MAX_TIME={self.run.TRAIN_MAX_TIME}s reached"

    def _check_losses(self, read: list[tuple[int, float, float]], best: float,
                      bar: tqdm) -> tuple[str | None, float]:
        """Divergence check of each read loss in step order, and the log of the logged
        steps: (the reason to stop, or None; the best loss so far). A divergence is found
        when its step's loss is read: at that step, or at the end of its log interval."""
        for step, loss, lr in read:
            reason = divergence(loss, best, step, self.step, self.run.TRAIN_DIVERGENCE_FACTOR)
            if reason:
                return reason, best
            best = min(best, loss)
            if logged(step, self.run.TRAIN_LOG_INTERVAL, self.run.GPT2_MAX_ITERS):
                self._log_step(loss, lr, bar, step)
        return None, best

    def _log_step(self, loss: float, lr: float, bar: tqdm, step: int) -> None:
        self.metrics.record_train(step, loss, lr)
        tps = self.metrics.tokens_per_sec
        ms = 1000 * self.derived["tokens_per_iter"] / tps if tps else float("nan")
        ppl = math.exp(min(loss, 50))
        bar.set_postfix(loss=f"{loss:.4f}", ppl=f"{ppl:.1f}", lr=f"{lr:.2e}", refresh=False)
        extra = ""
        if self.pruner is not None:
            sparsity = self.pruner.report()["sparsity"]
            self.metrics.record_point("sparsity", step, sparsity)
            extra += f" | sparsity {100 * sparsity:.1f}%"
        for key, value in optimizer_stats(self.optimizer).items():
            extra += f" | {key.replace('_', ' ')} {value}"
        for key, value in self.model.aux_metrics().items():  # e.g. HAMT slot utilisation
            self.metrics.record_point(key, step, value)
            extra += f" | {key.replace('_', ' ')} {value:.3f}"
        self.log(f"iter {step}/{self.run.GPT2_MAX_ITERS} | loss {loss:.4f} | ppl {ppl:.1f} "
                 f"| lr {lr:.2e} | {ms:.1f} ms/iter | {tps:,.0f} tok/s{extra}")
        self.tracker.log_train(step, self.metrics, self.device)

    # -- evaluation, checkpoints, records ----------------------------------------

    @torch.no_grad()
    def evaluate(self) -> float:
        """Validation cross-entropy alone (without a family's auxiliary terms), so
        losses and perplexities compare across model families."""
        self.model.eval()
        losses = torch.zeros(self.run.TRAIN_EVAL_ITERS)
        for i in range(self.run.TRAIN_EVAL_ITERS):
            x, y = self.loaders["val"].next_batch()
            with self.precision.autocast():
                logits, _ = self.train_step.forward(x, y)
            losses[i] = F.cross_entropy(logits.float().flatten(0, 1), y.flatten(),
                                        ignore_index=-1).item()
        self.model.train()
        return self.dist.mean(losses.mean().item())

    def _evaluate_and_save(self, evaluating: bool) -> None:
        best = False
        if evaluating:
            val = self.evaluate()
            best = self.metrics.record_val(self.step, val)
            self.early_stop.update(val)
            self.log(f"eval step {self.step}: val loss {val:.4f} | val ppl {math.exp(val):.2f}"
                     f"{' (best)' if best else ''}")
            self.tracker.log_eval(self.step, self.metrics)
            self.samples(self.step, self.model, self.device)
        # Best first: ckpt_latest and metrics.json record the new best, so a kill
        # between the writes must leave ckpt_best ahead of the record, never behind.
        if self.checkpoints.best_due(best):
            self.save("ckpt_best.pt")
        if self.checkpoints.latest_due(self.step):
            self.save("ckpt_latest.pt")
        self.metrics.write(self._summary("running"))
        self.backup.mirror()

    def save(self, name: str) -> None:
        rngs = self.dist.gather(rng_state())  # every rank's, so a resume continues exactly
        model, optimizer = self.dist.states(self.model, self.optimizer)
        if not self.dist.is_main:
            return
        save_checkpoint(self.run_dir / name, {
            "step": self.step, "family": self.run.MODEL,
            "model_config": asdict(self.model_config), "tokenizer": self.meta["tokenizer"],
            "model": model, "optimizer": optimizer, "rng_ranks": rngs,
            "batch": {"batch_size": self.batch_plan.batch_size,
                      "accumulation": self.batch_plan.accumulation},
            "scaler": self.train_step.scaler.state_dict(), "rng": rngs[0],
            "pruner": self.pruner.state_dict() if self.pruner is not None else None,
            "loaders": {k: loader.state_dict() for k, loader in self.loaders.items()},
            "metrics": self.metrics.state_dict(), "early_stop": self.early_stop.state_dict(),
        })

    def _restore(self, state: dict[str, Any]) -> None:
        self.dist.load_states(self.model, self.optimizer, state["model"], state["optimizer"])
        self.train_step.scaler.load_state_dict(state["scaler"])
        if self.pruner is not None:
            self.pruner.load_state_dict(state["pruner"])
        for k, loader in self.loaders.items():
            loader.load_state_dict(state["loaders"][k])
        self.metrics.load_state_dict(state["metrics"])
        self.early_stop.load_state_dict(state.get("early_stop"))
        ranks = state.get("rng_ranks") or []
        set_rng_state(ranks[self.dist.rank] if len(ranks) == self.dist.world_size else state["rng"])
        self.step = state["step"]
        self.metrics.record_event(step=self.step, event="resumed", overrides=self.run.overrides)
        self._remove_stale_temps()

    def _remove_stale_temps(self) -> None:
        """Temporaries a killed checkpoint or record write left (a checkpoint's size each),
        removed by the run's owner on resume and at the end: then nothing writes them."""
        if not self.dist.is_main:
            return
        removed = remove_stale_temps(self.run_dir, RUN_FILES) + self.backup.remove_stale_temps()
        if removed:
            self.log(f"removed {len(removed)} temporary file(s) of {sum(n for _, n in removed):,} "
                     f"bytes left by an interrupted write: {', '.join(p.name for p, _ in removed)}")

    def _summary(self, status: str, reason: str | None = None) -> dict[str, Any]:
        peak, measured = peak_memory_mb(self.device)
        fpt = self.model.flops_per_token(self.model_config.block_size)
        peak_flops = describe_device(self.device).peak_flops_16bit
        if self.precision.dtype == "fp32":
            peak_flops = None  # MFU is reported for 16-bit runs only (see lib/hardware/devices.py)
        return self.metrics.summary(status, self.step, self.step * self.derived["tokens_per_iter"], {
            "reason": reason, "compiled": self.train_step.compiled,
            "compile_error": self.train_step.compile_error,
            "mfu": mfu(fpt, self.metrics.tokens_per_sec,  # tokens/s of all ranks
                       peak_flops and peak_flops * self.dist.world_size),
            "peak_memory_mb": peak, "peak_memory_measure": measured, "monitor": self.monitor.write(),
            "stopped_early": status == "completed" and self.step < self.run.GPT2_MAX_ITERS,
            "stop_signal": self.stop_signal,  # set: resumable (exit code EXIT_RESUMABLE)
            "trackers": self.tracker.record(),  # in effect, not only asked (TRACKER_*)
            **optimizer_summary(self.run, self.optimizer, self.pruner)})

    def _finish(self, status: str, reason: str | None) -> dict[str, Any]:
        if status != "diverged" and not self.abandoned and self.checkpoints.due_at_stop(self.step):
            self.save("ckpt_latest.pt")  # resume point; `make continue` picks it up
        summary = self._summary(status, reason)
        self.metrics.write(summary)
        inference_at_end(self.run, self.model, self.run_dir, self.log)  # INFERENCE_BENCH
        self.backup.mirror()
        self._remove_stale_temps()
        self.tracker.close()
        self.log(f"{status}{': ' + reason if reason else ''} | step {self.step} | best val loss "
                 f"{summary['best_val_loss'] or float('nan'):.4f} | {summary['tokens_per_sec']:,.0f} tok/s")
        return summary

