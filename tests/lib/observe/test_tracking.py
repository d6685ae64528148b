"""Experiment tracking: TensorBoard event files, W&B offline, failures never stop a run."""

from __future__ import annotations

import json
import sys
import types

import pytest

from lib.config.kconfig import ConfigError, open_tree
from lib.config.run_config import load_run_config, write_outputs
from lib.observe import tracking
from lib.train.naming import create_run_dir
from lib.train.trainer import Trainer

PRUNED = dict(
    PRUNING_MODE_SINGLE="y",
    PRUNING_METHOD_MAGNITUDE="y",
    PRUNING_TARGET_SPARSITY="0.5",
    PRUNING_WARMUP=1,
    PRUNING_RAMP_END=5,
    PRUNING_FREQUENCY=1,
)


def train(tiny_run, name: str, **settings):
    run = tiny_run(GPT2_MAX_ITERS=6, GPT2_EVAL_INTERVAL=3, RUN_NAME=name, **settings)
    run_dir, lines = create_run_dir(run), []
    return Trainer(run, run_dir, log=lines.append).train(), run_dir, lines


def warnings(lines: list[str]) -> list[str]:
    return [line for line in lines if line.startswith("WARNING: tracker")]


def test_tensorboard_event_files_hold_the_run_figures(tiny_run):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    summary, run_dir, lines = train(tiny_run, "tb", TRACKER_TENSORBOARD="y", **PRUNED)
    events = EventAccumulator(str(run_dir / "tensorboard"))
    events.Reload()

    def matches(tag, recorded, values=None):
        steps = [e.step for e in events.Scalars(tag)]
        logged = [e.value for e in events.Scalars(tag)]
        return steps == recorded["iters"] and logged == pytest.approx(
            values or recorded["values"], rel=1e-6
        )

    assert matches("train/loss", summary["train_loss"])
    assert matches("train/lr", summary["train_loss"], summary["lr"]["values"])
    assert matches("val/loss", summary["val_loss"])
    assert matches("train/sparsity", summary["sparsity_series"])
    assert events.Scalars("train/sparsity")[-1].value == pytest.approx(0.5, abs=0.01)
    tags = set(events.Tags()["scalars"])
    assert {
        "train/perplexity",
        "perf/peak_memory_mb",
        "perf/tokens_per_sec",
        "perf/ms_per_iter",
        "val/perplexity",
    } <= tags
    # from step 1: over every step until one past the 3 warm-up steps is timed (lib/run/metrics.py)
    assert [e.step for e in events.Scalars("perf/tokens_per_sec")] == [1, 2, 3, 4, 5, 6]
    assert "tracking: tensorboard is on" in lines and warnings(lines) == []
    assert summary["trackers"] == {
        "requested": ["tensorboard"],
        "active": ["tensorboard"],
        "failed": {},
    }


def test_failing_tracker_warns_once_and_changes_nothing(tiny_run, monkeypatch):
    plain, _, _ = train(tiny_run, "plain")

    def disk_full(self, step, values):
        raise OSError("No space left on device")

    monkeypatch.setattr(tracking.TensorBoardBackend, "scalars", disk_full)
    summary, _, lines = train(tiny_run, "full", TRACKER_TENSORBOARD="y")
    assert summary["status"] == "completed" and summary["iterations"] == 6
    assert len(warnings(lines)) == 1 and "OSError: No space left on device" in warnings(lines)[0]
    assert summary["train_loss"] == plain["train_loss"] and summary["val_loss"] == plain["val_loss"]
    # the record says it went off, and why; the plain run asked for none
    assert summary["trackers"] == {
        "requested": ["tensorboard"],
        "active": [],
        "failed": {"tensorboard": "OSError: No space left on device"},
    }
    assert plain["trackers"] == {"requested": [], "active": [], "failed": {}}


def test_missing_wandb_package_warns_once(tiny_run, monkeypatch):
    monkeypatch.setitem(sys.modules, "wandb", None)  # `import wandb` raises ImportError
    summary, run_dir, lines = train(tiny_run, "nowandb", TRACKER_WANDB="y")
    assert summary["status"] == "completed"
    assert (
        len(warnings(lines)) == 1
        and "tracker wandb failed (its package is not installed" in warnings(lines)[0]
    )
    assert "pip install wandb" in warnings(lines)[0]
    # metrics.json on disk records what was in effect: wandb asked for, nothing logged
    written = json.loads((run_dir / "metrics.json").read_text())
    assert written["trackers"]["requested"] == ["wandb"] and written["trackers"]["active"] == []
    assert "its package is not installed" in written["trackers"]["failed"]["wandb"]


class FakeWandb(types.ModuleType):
    """Records what the tracker asks of wandb."""

    def __init__(self):
        super().__init__("wandb")
        self.kwargs, self.logged, self.finished = {}, [], 0

    def init(self, **kwargs):
        self.kwargs = kwargs
        return self

    def log(self, values, step):
        self.logged.append((step, dict(values)))

    def finish(self):
        self.finished += 1


def test_wandb_goes_offline_without_network(tiny_run, monkeypatch):
    fake = FakeWandb()
    monkeypatch.setitem(sys.modules, "wandb", fake)
    monkeypatch.setattr(tracking, "network_reachable", lambda *a, **k: False)
    monkeypatch.delenv("WANDB_MODE", raising=False)
    summary, run_dir, lines = train(tiny_run, "wb", TRACKER_WANDB="y")
    assert fake.kwargs["mode"] == "offline" and fake.kwargs["project"] == "kconfig-llm"
    assert fake.kwargs["dir"] == str(run_dir) and fake.kwargs["name"] == "wb"
    assert fake.kwargs["config"]["TRACKER_WANDB"] is True
    train_steps = [s for s, v in fake.logged if "train/loss" in v]
    assert train_steps == summary["train_loss"]["iters"] == [1, 2, 3, 4, 5, 6]
    assert [(s, v["val/loss"]) for s, v in fake.logged if "val/loss" in v] == list(
        zip(summary["val_loss"]["iters"], summary["val_loss"]["values"])
    )
    assert fake.finished == 1 and warnings(lines) == []


def test_wandb_takes_the_project_entity_and_run_name(tiny_run, monkeypatch):
    fake = FakeWandb()
    monkeypatch.setitem(sys.modules, "wandb", fake)
    monkeypatch.setattr(tracking, "network_reachable", lambda *a, **k: False)
    # one project for every tracker; W&B's own project, when set, wins for W&B
    _, run_dir, _ = train(
        tiny_run,
        "wb1",
        TRACKER_WANDB="y",
        TRACKER_PROJECT="study",
        TRACKER_WANDB_ENTITY="lab",
        TRACKER_RUN_NAME="baseline",
    )
    assert (fake.kwargs["project"], fake.kwargs["entity"]) == ("study", "lab")
    # shown as TRACKER_RUN_NAME, still keyed by the run id so a resume continues it
    assert (fake.kwargs["name"], fake.kwargs["id"]) == ("baseline", "wb1")
    train(
        tiny_run,
        "wb2",
        TRACKER_WANDB="y",
        TRACKER_PROJECT="study",
        TRACKER_WANDB_PROJECT="wandb-only",
    )
    assert (fake.kwargs["project"], fake.kwargs["entity"]) == ("wandb-only", None)
    assert (fake.kwargs["name"], fake.kwargs["id"]) == ("wb2", "wb2")


class FakeTrackio(types.ModuleType):
    """Records what the tracker asks of trackio (init returns the run it logs to)."""

    def __init__(self):
        super().__init__("trackio")
        self.inits, self.logged, self.finished = [], [], 0

    def init(self, **kwargs):
        self.inits.append(kwargs)
        return self

    def log(self, metrics, step=None):
        self.logged.append((step, dict(metrics)))

    def finish(self):
        self.finished += 1


def test_trackio_gets_the_project_run_name_config_and_every_figure(tiny_run, monkeypatch):
    fake = FakeTrackio()
    monkeypatch.setitem(sys.modules, "trackio", fake)
    summary, run_dir, lines = train(tiny_run, "tio", TRACKER_TRACKIO="y", **PRUNED)
    [kwargs] = fake.inits
    assert (kwargs["project"], kwargs["name"], kwargs["resume"]) == ("kconfig-llm", "tio", "never")
    assert kwargs["config"]["TRACKER_TRACKIO"] is True and kwargs["config"]["GPT2_MAX_ITERS"] == 6
    train_logged = [(s, v["train/loss"]) for s, v in fake.logged if "train/loss" in v]
    loss = summary["train_loss"]
    assert train_logged == list(zip(loss["iters"], loss["values"]))
    assert [(s, v["val/loss"]) for s, v in fake.logged if "val/loss" in v] == list(
        zip(summary["val_loss"]["iters"], summary["val_loss"]["values"])
    )
    assert [(s, v["train/sparsity"]) for s, v in fake.logged if "train/sparsity" in v] == list(
        zip(summary["sparsity_series"]["iters"], summary["sparsity_series"]["values"])
    )
    assert fake.finished == 1 and warnings(lines) == []
    assert (
        "tracking: trackio is on (project kconfig-llm, run tio; `trackio show --project "
        "kconfig-llm` shows it)" in lines
    )
    assert summary["trackers"] == {"requested": ["trackio"], "active": ["trackio"], "failed": {}}
    # a chosen project and run name; a resumed run continues its Trackio run
    chosen = tiny_run(TRACKER_TRACKIO="y", TRACKER_PROJECT="study", TRACKER_RUN_NAME="base")
    tracking.Tracker(
        chosen.observe,
        dict(chosen.values),
        run_dir,
        lines.append,
        resumed=True,
    )
    assert (fake.inits[-1]["project"], fake.inits[-1]["name"], fake.inits[-1]["resume"]) == (
        "study",
        "base",
        "allow",
    )


def test_a_resumed_run_continues_its_trackio_run(tiny_run, monkeypatch):
    from lib.run.checkpoint import load_checkpoint
    from tests.lib.stops import train_until

    fake = FakeTrackio()
    monkeypatch.setitem(sys.modules, "trackio", fake)
    run = tiny_run(GPT2_MAX_ITERS=6, GPT2_EVAL_INTERVAL=3, RUN_NAME="cont", TRACKER_TRACKIO="y")
    run_dir = create_run_dir(run)
    train_until(Trainer(run, run_dir, log=lambda _: None), 3)
    state = load_checkpoint(run_dir / "ckpt_latest.pt")
    summary = Trainer(run, run_dir, log=lambda _: None, resume=state).train()
    assert [(i["name"], i["resume"]) for i in fake.inits] == [("cont", "never"), ("cont", "allow")]
    assert [s for s, v in fake.logged if "train/loss" in v] == [1, 2, 3, 4, 5, 6]
    assert summary["train_loss"]["iters"] == [1, 2, 3, 4, 5, 6] and fake.finished == 2


def test_missing_trackio_package_warns_once(tiny_run, monkeypatch):
    monkeypatch.setitem(sys.modules, "trackio", None)  # `import trackio` raises ImportError
    summary, run_dir, lines = train(
        tiny_run, "notrackio", TRACKER_TRACKIO="y", TRACKER_TENSORBOARD="y"
    )
    assert summary["status"] == "completed"
    [warning] = warnings(lines)
    assert "tracker trackio failed (its package is not installed" in warning
    assert "pip install trackio" in warning
    written = json.loads((run_dir / "metrics.json").read_text())["trackers"]
    assert written["requested"] == ["tensorboard", "trackio"]
    assert written["active"] == ["tensorboard"]  # the other tracker goes on
    assert "its package is not installed" in written["failed"]["trackio"]


def test_real_trackio_stores_the_run_figures(tiny_run, tmp_path):
    """With the trackio package (not a requirement): what it stored, read back."""
    pytest.importorskip("trackio")
    from trackio.sqlite_storage import SQLiteStorage

    project = f"kconfig-llm-test-{tmp_path.name}"[:60]  # trackio's folder is shared (HF_HOME)
    summary, _, lines = train(tiny_run, "real", TRACKER_TRACKIO="y", TRACKER_PROJECT=project)
    assert warnings(lines) == [] and summary["trackers"]["active"] == ["trackio"]
    assert SQLiteStorage.get_runs(project) == ["real"]
    logs = SQLiteStorage.get_logs(project, "real")
    stored = [(row["step"], row["train/loss"]) for row in logs if "train/loss" in row]
    assert [s for s, _ in stored] == summary["train_loss"]["iters"]
    assert [v for _, v in stored] == pytest.approx(summary["train_loss"]["values"], rel=1e-6)
    val = [(row["step"], row["val/loss"]) for row in logs if "val/loss" in row]
    assert val == [
        (s, pytest.approx(v, rel=1e-6))
        for s, v in zip(summary["val_loss"]["iters"], summary["val_loss"]["values"])
    ]


def test_wandb_mode_follows_the_environment_and_the_option(monkeypatch):
    run = types.SimpleNamespace(TRACKER_WANDB_OFFLINE=False)
    monkeypatch.setattr(tracking, "network_reachable", lambda *a, **k: True)
    monkeypatch.delenv("WANDB_MODE", raising=False)
    assert tracking.wandb_mode(run) == "online"
    run.TRACKER_WANDB_OFFLINE = True
    assert tracking.wandb_mode(run) == "offline"
    monkeypatch.setenv("WANDB_MODE", "disabled")
    assert tracking.wandb_mode(run) == "disabled"


def test_tracker_override_switches_trackers(tmp_path):
    config = tmp_path / ".config"
    write_outputs(open_tree(), config, tmp_path / "config.py")

    def chosen(value):
        run = load_run_config([f"TRACKER={value}"], config)
        return run.TRACKER_TENSORBOARD, run.TRACKER_WANDB, run.TRACKER_TRACKIO

    assert chosen("tensorboard") == (True, False, False)
    assert chosen("wandb,tensorboard") == (True, True, False)
    assert chosen("trackio") == (False, False, True)
    assert chosen("trackio,wandb") == (False, True, True)
    assert chosen("none") == (False, False, False)
    assert load_run_config([], config).TRACKER_TENSORBOARD is False  # off by default
    with pytest.raises(
        ConfigError, match="unknown tracker mlflow; allowed tensorboard, wandb, trackio"
    ):
        load_run_config(["TRACKER=mlflow"], config)
