"""What the loop does with the losses it reads: the divergence test, and for
each logged step (every TRAIN_LOG_INTERVAL, the first, the last) the series
in metrics.json, the log line with each part's own fields (log_fields()),
the trackers and the progress bar; and the run's last line (end_line)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tqdm import tqdm

from lib.train.losses import divergence, logged

if TYPE_CHECKING:
    from lib.config.symbols import Train
    from lib.run.metrics import LogField, RunMetrics


class StepLog:
    def __init__(
        self,
        t: Train,
        metrics: RunMetrics,
        tracker: Any,
        fields: Callable[[], dict[str, LogField]],
        log: Callable[[str], None],
        device: Any,
        show: bool,
    ):
        self.t, self.metrics, self.tracker, self.fields = t, metrics, tracker, fields
        self.log, self.device, self.show = log, device, show
        self.best = math.inf  # the best training loss read so far
        self.bar: tqdm | None = None

    def open(self, step: int) -> None:
        self.bar = tqdm(
            total=self.t.GPT2_MAX_ITERS,
            initial=step,
            desc="train",
            dynamic_ncols=True,
            disable=not self.show,
        )

    def due(self, step: int) -> bool:
        """Whether step `step` is logged (its loss then has to be read)."""
        return logged(step, self.t.TRAIN_LOG_INTERVAL, self.t.GPT2_MAX_ITERS)

    def step_done(self, read: list[tuple[int, float, float]], now: int) -> str | None:
        """Step `now` finished: the bar moves on, then check(read, now)."""
        if self.bar is not None:
            self.bar.update(1)
        return self.check(read, now)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()

    def check(self, read: list[tuple[int, float, float]], now: int) -> str | None:
        """Divergence test of each read loss in step order, and the log of the logged
        steps; the reason to stop, or None. A divergence is found when its step's
        loss is read: at that step (`now`), or at the end of its log interval."""
        for step, loss, lr in read:
            reason = divergence(loss, self.best, step, now, self.t.TRAIN_DIVERGENCE_FACTOR)
            if reason:
                return reason
            self.best = min(self.best, loss)
            if self.due(step):
                self._line(step, loss, lr)
        return None

    def _line(self, step: int, loss: float, lr: float) -> None:
        self.metrics.record_train(step, loss, lr)
        fields = self.fields()  # sparsity, SPAM counters, HAMT slot use...
        self.metrics.record_fields(step, fields)
        tps = self.metrics.close_window()  # since the last line; the record keeps the run's
        ms = 1000 * self.metrics.static["tokens_per_iter"] / tps if tps else float("nan")
        ppl = math.exp(min(loss, 50))
        if self.bar is not None:
            self.bar.set_postfix(
                loss=f"{loss:.4f}", ppl=f"{ppl:.1f}", lr=f"{lr:.2e}", refresh=False
            )
        extra = "".join(f" | {key.replace('_', ' ')} {field.text}" for key, field in fields.items())
        self.log(
            f"iter {step}/{self.t.GPT2_MAX_ITERS} | loss {loss:.4f} | ppl {ppl:.1f} "
            f"| lr {lr:.2e} | {ms:.1f} ms/iter | {tps:,.0f} tok/s{extra}"
        )
        self.tracker.log_train(step, self.metrics, self.device)


def end_line(summary: dict[str, Any], step: int) -> str:
    """The run's last log line, from its record: a loss the record holds as null
    (no finite evaluation, as in a run that diverged first) is said, not printed nan."""
    status, reason = summary["status"], summary.get("reason")
    best, per_char = summary.get("best_val_loss"), summary.get("best_val_loss_per_char")
    if best is None:
        loss = "no best val loss (no evaluation finished with a finite loss)"
    else:
        loss = f"best val loss {best:.4f}" + (
            f" ({per_char:.4f} nats/char)" if per_char is not None else ""
        )
    return (
        f"{status}{': ' + reason if reason else ''} | step {step} | {loss} | "
        f"{summary['tokens_per_sec']:,.0f} tok/s"
    )
