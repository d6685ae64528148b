"""Run metrics: loss series, throughput, MFU, peak memory; metrics.json writer.

metrics.json is rewritten atomically at every evaluation and at the end, so
it always describes the run as far as it got; a full disk marks it failed
without losing a field (lib/run/full_disk.py). Its fields are the contract
that `make results` and later tools read. "environment" is the software and
hardware this process ran on (lib/run/environment.py); a resumed run records
those of its last segment.
"""

from __future__ import annotations

import math
import resource
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from lib.atomic import DiskFullError, write_json_atomic
from lib.run.environment import environment
from lib.run.full_disk import RESERVE, record_write_failed
from lib.run.record_model import MetricsRecord, check

# Steps after each (re)start whose time is excluded from throughput: every new
# process pays compilation, allocator warm-up and cold caches again. When no
# segment of the run got past its warm-up (stopped and resumed every few
# steps), throughput is measured over every step instead, warm-up included.
WARMUP_STEPS = 3


def peak_memory_mb(device: torch.device) -> tuple[float, str]:
    """(peak MiB, what was measured): CUDA max allocated, else process peak RSS."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20, "cuda_max_allocated"
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    scale = 1 if sys.platform == "darwin" else 1024  # bytes on macOS, KiB on Linux
    return rss * scale / 2**20, "peak_rss"


def mfu(flops_per_token: float, tokens_per_sec: float, peak_flops: float | None) -> float | None:
    """Model FLOPs utilisation (PaLM appendix B), None when the peak is unknown."""
    if not peak_flops or not tokens_per_sec:
        return None
    return flops_per_token * tokens_per_sec / peak_flops


@dataclass(frozen=True)
class KernelShare:
    """What the kernel did for this process between two getrusage readings (all its
    threads): minor page faults and system seconds."""

    page_faults: int
    system_s: float

    @staticmethod
    def now() -> resource.struct_rusage:
        return resource.getrusage(resource.RUSAGE_SELF)

    @classmethod
    def since(cls, before: resource.struct_rusage) -> KernelShare:
        after = cls.now()
        return cls(after.ru_minflt - before.ru_minflt, after.ru_stime - before.ru_stime)


@dataclass(frozen=True)
class LogField:
    """One field a component reports for the training log line (its log_fields()):
    the text shown, and the value metrics.json keeps as the series "<name>_series"
    (None: shown only)."""

    text: str
    series: float | None = None


class RunMetrics:
    """Accumulates what a run measures; state_dict() lets a resumed run continue it."""

    def __init__(self, path: Path, static: dict[str, Any], write: bool = True):
        self.path = Path(path)
        self.enabled = write  # False on every rank but 0 of a multi-process run
        self.static = static
        self.train_loss: dict[str, list] = {"iters": [], "values": []}
        self.val_loss: dict[str, list] = {"iters": [], "values": []}
        self.lr: dict[str, list] = {"iters": [], "values": []}
        self.best_val_loss = math.inf
        self.timed_tokens = 0
        self.timed_seconds = 0.0
        # The kernel's share of those steps (getrusage): minor page faults and system
        # seconds, whose sum over the timed steps says where a CPU step's time went
        # outside the arithmetic (CPU_MALLOC_KEEP).
        self.timed_steps = 0
        self.timed_page_faults = 0
        self.timed_system_s = 0.0
        self.all_tokens = 0  # every step's, warm-up included
        self.wall_time_s = 0.0
        self.events: list[dict[str, Any]] = []
        self.points: dict[str, dict[str, list]] = {}  # other series, e.g. sparsity
        self._steps_this_segment = 0
        # The steps since the last log line: its speed is theirs, not the whole run's
        # (after `make continue`, the earlier segments' speed is another machine's or
        # load's). [tokens, seconds] of every step, and of those past the warm-up.
        self._window = [0, 0.0]
        self._window_timed = [0, 0.0]
        self.recent_tokens_per_sec = 0.0  # over the last closed window (close_window)
        self.environment = environment()  # of this process, not saved in checkpoints

    def record_step(self, seconds: float, tokens: int, kernel: KernelShare | None = None) -> None:
        self._steps_this_segment += 1
        self.wall_time_s += seconds
        self.all_tokens += tokens
        self._window[0] += tokens
        self._window[1] += seconds
        if self._steps_this_segment > WARMUP_STEPS:
            self.timed_tokens += tokens
            self.timed_seconds += seconds
            self._window_timed[0] += tokens
            self._window_timed[1] += seconds
            if kernel is not None:
                self.timed_steps += 1
                self.timed_page_faults += kernel.page_faults
                self.timed_system_s += kernel.system_s

    def record_train(self, it: int, loss: float, lr: float) -> None:
        for series, value in ((self.train_loss, loss), (self.lr, lr)):
            series["iters"].append(it)
            series["values"].append(value)

    def record_point(self, name: str, it: int, value: float) -> None:
        series = self.points.setdefault(name, {"iters": [], "values": []})
        series["iters"].append(it)
        series["values"].append(value)

    def record_fields(self, it: int, fields: dict[str, LogField]) -> None:
        for name, field in fields.items():
            if field.series is not None:
                self.record_point(name, it, field.series)

    def record_val(self, it: int, loss: float) -> bool:
        """Record a validation loss; True when it is the best so far."""
        self.val_loss["iters"].append(it)
        self.val_loss["values"].append(loss)
        if loss < self.best_val_loss:
            self.best_val_loss = loss
            return True
        return False

    def record_event(self, **event: Any) -> None:
        self.events.append(event)

    def per_char(self, loss: float) -> float:
        """A validation loss per token as nats per character of the validation text
        (lib/data/valchars.py); the loss itself when the record lacks the factor."""
        return loss * self.static.get("val_tokens_per_char", 1.0)

    @property
    def tokens_per_sec(self) -> float:
        """Over the steps after each segment's warm-up, summed over all segments;
        over all steps when there are none (see WARMUP_STEPS)."""
        if self.timed_seconds:
            return self.timed_tokens / self.timed_seconds
        return self.all_tokens / self.wall_time_s if self.wall_time_s else 0.0

    def close_window(self) -> float:
        """Tokens per second over the steps since the last call (past the segment's
        warm-up where the window has such steps, else all of them; the whole run's
        when it has none), kept as recent_tokens_per_sec; a new window starts."""
        tokens, seconds = self._window_timed if self._window_timed[1] else self._window
        self.recent_tokens_per_sec = tokens / seconds if seconds else self.tokens_per_sec
        self._window, self._window_timed = [0, 0.0], [0, 0.0]
        return self.recent_tokens_per_sec

    def summary(
        self, status: str, iterations: int, tokens_seen: int, extra: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        tps = self.tokens_per_sec
        tokens_per_iter = self.static["tokens_per_iter"]
        steps = self.timed_steps
        best = self.best_val_loss if math.isfinite(self.best_val_loss) else None
        final = self.val_loss["values"][-1] if self.val_loss["values"] else None
        return {
            "status": status,
            "iterations": iterations,
            "best_val_loss": best,
            "best_val_perplexity": math.exp(best) if best is not None else None,
            "final_val_loss": final,
            "final_val_perplexity": math.exp(final) if final is not None else None,
            "best_val_loss_per_char": self.per_char(best) if best is not None else None,
            "final_val_loss_per_char": self.per_char(final) if final is not None else None,
            "tokens_per_sec": tps,
            "ms_per_iter": 1000 * tokens_per_iter / tps if tps else None,
            "page_faults_per_iter": self.timed_page_faults / steps if steps else None,
            "system_ms_per_iter": 1000 * self.timed_system_s / steps if steps else None,
            "tokens_seen": tokens_seen,
            "wall_time_s": self.wall_time_s,
            **self.static,
            "environment": self.environment,
            **(extra or {}),
            "events": self.events,
            "train_loss": self.train_loss,
            "val_loss": self.val_loss,
            "val_loss_per_char": {
                "iters": self.val_loss["iters"],
                "values": [self.per_char(v) for v in self.val_loss["values"]],
            },
            "lr": self.lr,
            **{f"{name}_series": series for name, series in self.points.items()},
        }

    def write(self, summary: dict[str, Any]) -> None:
        """Write the record with room for a failure note (lib/run/full_disk.py); on a
        full disk, the note goes into that room and the error says what the file holds.
        A field of the wrong type (lib/run/record_model.py) raises RecordError naming
        it, before anything is written."""
        if not self.enabled:
            return
        check(MetricsRecord, self.path, summary)
        try:
            write_json_atomic(self.path, summary, RESERVE)
        except DiskFullError as err:
            raise record_write_failed(self.path, summary, err) from None

    def state_dict(self) -> dict[str, Any]:
        keys = (
            "train_loss",
            "val_loss",
            "lr",
            "best_val_loss",
            "timed_tokens",
            "timed_seconds",
            "timed_steps",
            "timed_page_faults",
            "timed_system_s",
            "all_tokens",
            "wall_time_s",
            "events",
            "points",
        )
        return {k: getattr(self, k) for k in keys}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for key, value in state.items():
            setattr(self, key, value)
