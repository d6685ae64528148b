"""Experiment tracking: TensorBoard event files, Weights & Biases and Trackio, all optional.

Off by default; CONFIG_TRACKER_TENSORBOARD, CONFIG_TRACKER_WANDB and
CONFIG_TRACKER_TRACKIO turn them on (`make TRACKER=tensorboard,wandb,trackio`).
At every progress line the trainer logs train/loss, train/perplexity,
train/lr, perf/tokens_per_sec, perf/ms_per_iter, perf/peak_memory_mb and every
other series the run records at that step (sparsity, HAMT's slot_utilisation,
aux_loss, lm_loss) as train/<name>; at every evaluation val/loss and
val/perplexity. TensorBoard writes <run>/tensorboard/
(torch.utils.tensorboard; `tensorboard --logdir results`). W&B writes under
<run>/wandb/, offline when the network is unreachable or
CONFIG_TRACKER_WANDB_OFFLINE is set (`wandb sync` uploads later); WANDB_MODE in
the environment wins. Trackio logs to its own folder ($TRACKIO_DIR, default
$HF_HOME/trackio), one SQLite file per project, so `trackio show` compares runs
of every run folder. W&B and Trackio log to CONFIG_TRACKER_PROJECT (W&B to
CONFIG_TRACKER_WANDB_PROJECT when set) under CONFIG_TRACKER_RUN_NAME (empty:
the run id). A tracker that is missing or fails, at start-up or
later, warns once and is switched off: tracking never stops training.
metrics.json's "trackers" records which were in effect and why any went off.
"""

from __future__ import annotations

import math
import os
import re
import socket
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from lib.run.metrics import RunMetrics, peak_memory_mb

if TYPE_CHECKING:
    from lib.config.symbols import Observe

WANDB_HOST = ("api.wandb.ai", 443)


class TensorBoardBackend:
    def __init__(self, o: Observe, hparams: dict[str, Any], run_dir: Path, resumed: bool = False):
        from torch.utils.tensorboard import SummaryWriter  # needs the tensorboard package

        self.writer = SummaryWriter(log_dir=str(run_dir / "tensorboard"), flush_secs=10)

    def scalars(self, step: int, values: dict[str, float]) -> None:
        for key, value in values.items():
            self.writer.add_scalar(key, value, step)

    def flush(self) -> None:
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


def network_reachable(host: tuple[str, int] = WANDB_HOST, timeout: float = 3.0) -> bool:
    try:
        socket.create_connection(host, timeout=timeout).close()
        return True
    except OSError:
        return False


def wandb_mode(o: Observe) -> str:
    """WANDB_MODE if set, else offline when asked or when W&B cannot be reached."""
    if os.environ.get("WANDB_MODE"):
        return os.environ["WANDB_MODE"]
    if o.TRACKER_WANDB_OFFLINE or not network_reachable():
        return "offline"
    return "online"


DEFAULT_PROJECT = "kconfig-llm"


def run_name(o: Observe, run_dir: Path) -> str:
    """The name W&B and Trackio show: TRACKER_RUN_NAME, else the run id."""
    return o.TRACKER_RUN_NAME or run_dir.name


def project(o: Observe, wandb: bool = False) -> str:
    """TRACKER_PROJECT (W&B: TRACKER_WANDB_PROJECT first); empty is the default's."""
    named = (o.TRACKER_WANDB_PROJECT if wandb else "") or o.TRACKER_PROJECT
    return named or DEFAULT_PROJECT


class WandbBackend:
    def __init__(self, o: Observe, hparams: dict[str, Any], run_dir: Path, resumed: bool = False):
        import wandb  # optional: pip install wandb

        # Keyed by the run id, whatever its shown name, so a resumed run continues.
        run_id = re.sub(r"[^A-Za-z0-9_-]", "-", run_dir.name)[:64]
        self.run = wandb.init(
            project=project(o, wandb=True),
            entity=o.TRACKER_WANDB_ENTITY or None,
            name=run_name(o, run_dir),
            id=run_id,
            dir=str(run_dir),
            config=dict(hparams),
            mode=wandb_mode(o),
            resume="allow",
        )

    def scalars(self, step: int, values: dict[str, float]) -> None:
        self.run.log(values, step=step)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self.run.finish()


class TrackioBackend:
    def __init__(self, o: Observe, hparams: dict[str, Any], run_dir: Path, resumed: bool = False):
        import trackio  # optional: pip install trackio

        # Trackio keys a run by its name in the project: a resumed run continues its
        # series; a new one never joins an earlier run of the same TRACKER_RUN_NAME.
        name, where = run_name(o, run_dir), project(o)
        self.trackio = trackio
        self.run = trackio.init(
            project=where,
            name=name,
            config=dict(hparams),
            resume="allow" if resumed else "never",
        )
        self.where = f"project {where}, run {name}; `trackio show --project {where}` shows it"

    def scalars(self, step: int, values: dict[str, float]) -> None:
        self.run.log(values, step=step)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        # the module's finish also forgets the run, so trackio's exit hook leaves it be
        self.trackio.finish()


BACKENDS: dict[str, tuple[str, Callable[..., Any]]] = {
    "tensorboard": ("TRACKER_TENSORBOARD", TensorBoardBackend),
    "wandb": ("TRACKER_WANDB", WandbBackend),
    "trackio": ("TRACKER_TRACKIO", TrackioBackend),
}


class Tracker:
    """The trackers a run asked for; each failure warns once and drops that tracker."""

    def __init__(
        self,
        o: Observe,
        hparams: dict[str, Any],
        run_dir: Path,
        log: Callable[[str], None],
        main: bool = True,
        resumed: bool = False,
    ):
        """hparams: the whole configuration (symbol -> value), which W&B and Trackio
        log as the run's config; main: whether this process logs (the first rank of
        a distributed run); resumed: the run continues from a checkpoint (`make continue`)."""
        self.log, self.backends = log, {}
        self.requested = [name for name, (symbol, _) in BACKENDS.items() if getattr(o, symbol)]
        self.failed: dict[str, str] = {}  # name -> why it went off
        for name, (_symbol, make) in BACKENDS.items():
            if main and name in self.requested:
                try:
                    backend = self.backends[name] = make(o, hparams, Path(run_dir), resumed)
                    where = getattr(backend, "where", "")
                    log(f"tracking: {name} is on" + (f" ({where})" if where else ""))
                except ImportError as err:
                    self._warn(
                        name,
                        f"its package is not installed ({err}); "
                        f"`.venv/bin/pip install {err.name or name}`",
                    )
                except Exception as err:  # no permission, bad project, ...
                    self._warn(name, err)

    def _warn(self, name: str, err: Exception | str) -> None:
        why = err if isinstance(err, str) else f"{type(err).__name__}: {err}"
        self.failed[name] = why
        self.log(
            f"WARNING: tracker {name} failed ({why}); it is off for the rest of this "
            f"run, and training goes on"
        )

    def record(self) -> dict[str, Any]:
        """metrics.json's "trackers": what was in effect, not only what was asked
        (TRACKER_* in the configuration): "active" are still logging, "failed"
        went off at start-up or later, with the reason. Ranks other than the
        first never log, so they report nothing active."""
        return {
            "requested": list(self.requested),
            "active": sorted(self.backends),
            "failed": dict(self.failed),
        }

    def _each(self, call: Callable[[Any], None]) -> None:
        for name, backend in list(self.backends.items()):
            try:
                call(backend)
            except Exception as err:  # a tracker must never end a run
                del self.backends[name]
                self._warn(name, err)

    def log_train(self, step: int, metrics: RunMetrics, device: torch.device) -> None:
        if not self.backends or not metrics.train_loss["iters"]:
            return
        loss = metrics.train_loss["values"][-1]
        values = {
            "train/loss": loss,
            "train/perplexity": math.exp(min(loss, 50)),
            "train/lr": metrics.lr["values"][-1],
            "perf/peak_memory_mb": peak_memory_mb(device)[0],
        }
        tps = metrics.recent_tokens_per_sec or metrics.tokens_per_sec  # the log line's
        if tps:
            values["perf/tokens_per_sec"] = tps
            values["perf/ms_per_iter"] = 1000 * metrics.static["tokens_per_iter"] / tps
        for name, series in metrics.points.items():
            if series["iters"] and series["iters"][-1] == step:
                values[f"train/{name}"] = series["values"][-1]
        self._each(lambda b: b.scalars(step, values))

    def log_eval(self, step: int, metrics: RunMetrics) -> None:
        if not self.backends or not metrics.val_loss["iters"]:
            return
        loss = metrics.val_loss["values"][-1]
        self._each(
            lambda b: b.scalars(step, {"val/loss": loss, "val/perplexity": math.exp(min(loss, 50))})
        )
        self._each(lambda b: b.flush())

    def close(self) -> None:
        self._each(lambda b: b.close())
        self.backends = {}
