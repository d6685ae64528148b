"""Whole-run time estimates, calibrated on this machine's completed runs.

The FLOP model (timing.py) gives a run's steps and evaluations at an assumed
rate. A run's process costs more: Python and torch start-up, the data and the
model, compilation, evaluations, checkpoints and metrics.json. Both are
measured by the runs already under the results root, when some have the same
shape as the planned one (family and model dimensions, vocabulary, tokens per
step, device by name, precision, processes, compile on or off):

* the step: their steady ms/iter (metrics.json, each segment's warm-up steps
  left out), median;
* an evaluation: the FLOP model's, scaled by the same measured/assumed ratio;
* the fixed cost: what a matrix measured for each run's whole process
  (matrix.json "seconds", else its "started"/"ended" stamps) less its steps
  and evaluations at that rate, median.

A tuned matrix's completed trials (<matrix>/tune/<configuration>/trial-NNN/,
each timed by its own matrix.json, lib/tune/stage.py) count as runs: short
runs of the same shapes, measured the same way. A trial the study pruned
stopped early but ran steady steps: its ms/iter is a step's time and its
fixed cost is its process less the steps and evaluations it did run, so it
calibrates like any run; a failed or diverged trial does not.

Without such runs, the FLOP model plus an assumed start-up (STARTUP_S). The
optimizer, pruning and seed are not part of the shape: they change a step by
far less than the machine's load does. A run on a loaded machine calibrates
the next estimate to that load.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lib.atomic import read_json_object
from lib.plural import counted

if TYPE_CHECKING:
    from lib.config.run_config import RunConfig

# Assumed fixed cost of one run's process where nothing measured it: imports,
# data, model, first steps, checkpoints. CPU: 8-12 s measured for the tiny
# GPT-2 defconfigs on an idle 2-core machine; CUDA adds context creation.
STARTUP_S = {"cpu": 10.0, "cuda": 20.0}
NEWEST = 12  # completed runs of a shape that count: the latest ones
TUNE_DIR = "tune"  # a matrix's trials, as lib/tune/stage.py names it (a layer above)
UNCALIBRATED = "from the FLOP rate, uncalibrated"


@dataclass(frozen=True)
class Measured:
    """What one completed run took."""

    shape: str
    step_s: float  # steady seconds per step
    steps: int
    evaluations: int
    process_s: float | None  # the whole process, where a matrix timed it
    when: float
    trial: bool = False  # a tuning stage's trial, not one of a matrix's runs


@dataclass(frozen=True)
class RunEstimate:
    seconds: float
    basis: str  # UNCALIBRATED, or "calibrated from N runs and M trials of this shape ..."
    calibrated: int  # how many completed runs and trials it rests on


def shape(
    model: str,
    model_config: dict[str, Any],
    tokens_per_iter: int,
    device: str,
    dtype: str,
    world: int,
    compiled: bool,
) -> str:
    """The key two runs of the same speed share."""
    config = json.loads(json.dumps(model_config, default=str))  # tuples as JSON lists
    return json.dumps(
        [model, config, tokens_per_iter, device, dtype, world, compiled], sort_keys=True
    )


def planned_shape(run: RunConfig, info: Any = None) -> str | None:
    """The shape of a run not trained yet (None where the device cannot run it)."""
    from lib.data.vocab import configured_vocab
    from lib.estimate.memory import configured_device, model_counts, world_size
    from lib.speed.precision import choose_dtype

    info = info or configured_device(run)
    try:
        dtype, _ = choose_dtype(run.speed, info.kind, info.bf16)
    except RuntimeError:
        return None
    cfg, _ = model_counts(run, configured_vocab(run.data))
    world = world_size(run)
    return shape(
        run.MODEL,
        asdict(cfg),
        run.derived(world)["tokens_per_iter"],
        info.name,
        dtype,
        world,
        bool(run.COMPILE_MODEL),
    )


def _compiled(folder: Path) -> bool:
    try:
        return "CONFIG_COMPILE_MODEL=y" in (folder / "config.txt").read_text().splitlines()
    except (OSError, UnicodeDecodeError):
        return False


def measured(folder: Path, process_s: float | None = None, trial: bool = False) -> Measured | None:
    """A completed run folder's record, None for anything else."""
    m = read_json_object(folder / "metrics.json")
    try:
        step_s = float(m["ms_per_iter"]) / 1000
        key = shape(
            m["model"],
            m["model_config"],
            int(m["tokens_per_iter"]),
            m["device_name"],
            m["dtype"],
            int(m.get("world_size") or 1),
            _compiled(folder),
        )
        steps, evaluations = int(m["iterations"]), len(m["val_loss"]["iters"])
        when = (folder / "metrics.json").stat().st_mtime
    except (KeyError, TypeError, ValueError, OSError):
        return None
    if m.get("status") != "completed" or not step_s > 0 or steps <= 0:
        return None
    return Measured(key, step_s, steps, evaluations, process_s, when, trial)


def parse_stamp(text: Any) -> float | None:
    try:
        return time.mktime(time.strptime(str(text), "%Y-%m-%d %H:%M:%S"))
    except ValueError:
        return None


def process_seconds(entry: dict[str, Any]) -> float | None:
    """A matrix run's process time: "seconds", else ended - started (1 s stamps);
    None for a run that was resumed (its stamps cover the last attempt only)."""
    if entry.get("attempts") != 1 or entry.get("reused_from"):
        return None
    if isinstance(entry.get("seconds"), (int, float)):
        return float(entry["seconds"])
    start, end = parse_stamp(entry.get("started")), parse_stamp(entry.get("ended"))
    return end - start if start is not None and end is not None and end >= start else None


def _matrix_runs(root: Path, trial: bool) -> Iterator[tuple[Path, float | None, bool]]:
    """The runs a matrix.json at root lists that ended as completed (a pruned
    trial too), with their process time; a reused run (a link) is its source's."""
    matrix = read_json_object(root / "matrix.json")
    runs = matrix.get("runs")
    if not isinstance(runs, dict):
        return
    for run_id, entry in runs.items():
        folder = root / run_id
        if (
            isinstance(entry, dict)
            and entry.get("state") == "completed"
            and folder.is_dir()
            and not folder.is_symlink()
        ):
            yield folder, process_seconds(entry), trial


def _subfolders(folder: Path) -> list[Path]:
    try:
        return [p for p in folder.iterdir() if p.is_dir() and not p.is_symlink()]
    except OSError:
        return []


def _folders(results: Path) -> Iterator[tuple[Path, float | None, bool]]:
    """Run folders under results (single runs, matrix runs and their tuning
    trials) with their process time and whether each is a trial."""
    for top in _subfolders(results):
        if (top / "matrix.json").is_file():
            yield from _matrix_runs(top, trial=False)
            for config in _subfolders(top / TUNE_DIR):
                yield from _matrix_runs(config, trial=True)
        elif (top / "metrics.json").is_file():
            yield top, None, False


def completed_runs(results: Path) -> list[Measured]:
    """Every completed run and tuning trial under results, measured."""
    return [
        m
        for folder, seconds, trial in _folders(Path(results))
        if (m := measured(folder, seconds, trial)) is not None
    ]


def estimate_run(run: RunConfig, completed: list[Measured], info: Any = None) -> RunEstimate | None:
    """Seconds for `run`'s whole process, and what they rest on; None where the
    FLOP model knows no rate for the device."""
    from lib.estimate.memory import configured_device
    from lib.estimate.timing import breakdown

    info = info or configured_device(run)
    parts = breakdown(run, info)
    if parts is None:
        return None
    key = planned_shape(run, info)
    same = sorted((m for m in completed if m.shape == key), key=lambda m: -m.when)[:NEWEST]
    startup = STARTUP_S.get(info.kind, STARTUP_S["cuda"]) + parts.compile_s
    if not same:
        return RunEstimate(startup + parts.total - parts.compile_s, UNCALIBRATED, 0)
    step_s = statistics.median(m.step_s for m in same)
    eval_s = parts.eval_s * step_s / parts.step_s if parts.step_s else 0.0
    fixed = [
        m.process_s - m.steps * m.step_s - m.evaluations * eval_s
        for m in same
        if m.process_s is not None
    ]
    fixed_s = max(0.0, statistics.median(fixed)) if fixed else startup
    seconds = fixed_s + parts.steps * step_s + parts.evaluations * eval_s
    trials = sum(m.trial for m in same)
    runs = " and ".join(
        counted(n, noun) for n, noun in ((len(same) - trials, "run"), (trials, "trial")) if n
    )
    basis = (
        f"calibrated from {runs} of this shape on this machine"
        if fixed
        else f"step time from {runs} of this shape on this machine, start-up assumed"
    )
    return RunEstimate(seconds, basis, len(same))
