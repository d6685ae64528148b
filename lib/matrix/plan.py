"""The plan a test matrix prints before it runs (and all DRY_RUN=1 prints):
every run with its overrides, estimated peak memory and estimated time (its
whole process, lib/estimate/calibrate.py, with what the estimate rests on), and
with MATRIX_SEEDS how many configurations times which seeds. A run an earlier
completed run makes unnecessary (lib/jobs/reuse.py) shows `reused` and the
run it links to, and the total says how much time that saves. Last, how the
runs share this machine's GPUs (lib/jobs/packing.py): the runs that start
at once on each GPU; a run too big for every GPU stops the plan there."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from lib.config.kconfig import ConfigError
from lib.estimate.calibrate import Measured, RunEstimate, completed_runs, estimate_run
from lib.estimate.memory import FIT_MARGIN
from lib.estimate.verdict import DAY_S, Verdict
from lib.jobs import PlannedRun, packing, reuse
from lib.matrix.seeds import parse_seeds
from lib.plural import counted
from lib.run.rundir import results_root

if TYPE_CHECKING:
    from lib.config.run_config import RunConfig


def _estimates(
    run: RunConfig, completed: list[Measured], info: Any = None
) -> tuple[float | None, RunEstimate | None, Verdict | None]:
    """(GiB, time, whether it can train on the device) from lib/estimate, for
    `info` (a known GPU, GPU=) or the device the run would use; None where it
    cannot say."""
    from lib.estimate import estimate_memory
    from lib.estimate.memory import configured_device

    device = info or configured_device(run)
    estimate = estimate_run(run, completed, device)
    try:
        memory = estimate_memory(run, device_info=device)
    except (ValueError, KeyError) as err:  # an estimator gap must not block a plan
        print(f"  (memory estimate unavailable for {run.RUN_NAME or 'a run'}: {err})")
        return None, estimate, None
    verdict = Verdict(
        "CPU RAM (here)" if device.kind == "cpu" else device.name,
        device.kind,
        memory.required_bytes(),
        device.memory_bytes,
        estimate.seconds if estimate else None,
    )
    return memory.total_bytes / 2**30, estimate, verdict


def device_info(name: str | None) -> Any:
    """GPU=<name>'s DeviceInfo, as `make estimate GPU=` takes it; None: this machine."""
    if not name:
        return None
    from lib.hardware.devices import profile, profile_info

    try:
        return profile_info(profile(name))
    except ValueError as err:
        raise ConfigError([f"GPU={name}: {err}"], "test matrix") from None


def _elsewhere(verdicts: list[Verdict], total_s: float, gpu: str | None) -> str | None:
    """The line saying that the matrix is meant for another device than the one
    planned for: runs that do not fit in its memory, or days of training."""
    if not verdicts:
        return None
    device = verdicts[0]
    unfit = sum(not v.fits for v in verdicts)
    if not unfit and total_s <= DAY_S:
        return None
    why = [
        *(
            [f"{unfit} of the {counted(len(verdicts), 'run')} need more memory than it has"]
            if unfit
            else []
        ),
        *(
            [f"one after another they would take about {_duration(total_s)}"]
            if total_s > DAY_S
            else []
        ),
    ]
    where = "this CPU" if device.kind == "cpu" and not gpu else device.device
    hint = (
        "GPU=<name> plans it for a known GPU (`make test-matrix-dry-run GPU=H100`)"
        if device.kind == "cpu"
        else "GPU=<name> plans it for another GPU, `make estimate` sizes one run"
    )
    return (
        f"device: this matrix is meant for another device than {where}: {' and '.join(why)}; {hint}"
    )


def time_basis(estimates: list[RunEstimate | None]) -> str:
    """What the times rest on: "calibrated from 4 runs of this shape on this
    machine", "from the FLOP rate, uncalibrated", or both with their counts."""
    bases = Counter(e.basis for e in estimates if e is not None)
    if len(bases) == 1:
        return next(iter(bases))
    return "; ".join(f"{counted(n, 'run')} {basis}" for basis, n in bases.most_common())


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    if 0 < seconds < 0.5:
        return "<1 s"  # a time, not nothing
    if seconds < 60:
        return f"{seconds:.0f} s"
    minutes = seconds / 60
    return f"{minutes:.1f} min" if minutes < 120 else f"{minutes / 60:.1f} h"


def _count(base: RunConfig, planned: list[PlannedRun]) -> str:
    """ "6 runs (2 configurations x 3 seeds: 1 2 3)"; "6 runs" without seeds."""
    seeds = parse_seeds(base.MATRIX_SEEDS)
    if not seeds:
        return counted(len(planned), "run")
    configurations = counted(len(planned) // len(seeds), "configuration")
    return (
        f"{counted(len(planned), 'run')} ({configurations} x "
        f"{counted(len(seeds), 'seed')}: {' '.join(map(str, seeds))})"
    )


def show(base: RunConfig, planned: list[PlannedRun], gpu: str | None = None) -> None:
    """Print the grid as a table, the run count and the totals; gpu: estimate
    for that known GPU (GPU=H100) instead of the device the runs would use."""
    info = device_info(gpu)
    matches: dict[str, reuse.Match] = {}
    note: str | None = "reuse: checked after tuning, once the runs' values are known"
    if not base.MATRIX_TUNE:  # tuned runs' values are known after tuning: reuse is decided then
        matches, note = reuse.find({p.run_id: p.config for p in planned}, results_root(base.run))
    completed = completed_runs(results_root(base.run))
    rows, total_s, saved_s, unknown, estimates = [], 0.0, 0.0, 0, []
    verdicts: list[Verdict] = []
    for p in planned:
        gib, estimate, verdict = _estimates(p.config, completed, info)
        seconds = estimate.seconds if estimate else None
        what = " ".join(f"{k}={v}" for k, v in p.overrides if k not in ("OPTIMIZER_MODE",))
        match = matches.get(p.run_id)
        if match is not None:  # the estimate, else what the earlier run took
            saved_s += seconds if seconds is not None else match.wall_time_s or 0.0
            gains = f"  {match.owed.describe()}" if match.owed.produce else ""
            rows.append((p.run_id, "-", "reused", f"{what}  <- {match.name}{gains}"))
            continue
        unknown += seconds is None
        estimates.append(estimate)
        verdicts += [verdict] if verdict is not None else []
        total_s += seconds or 0.0
        rows.append((p.run_id, "?" if gib is None else f"{gib:.2f}", _duration(seconds), what))
    width = max([len(r[0]) for r in rows] + [6])
    print(f"{'run':<{width}}  {'mem GiB':>8}  {'time':>9}  overrides on .config")
    for run_id, mem, time_, what in rows:
        print(f"{run_id:<{width}}  {mem:>8}  {time_:>9}  {what}")
    common = " ".join(f"{k}={v}" for k, v in base.overrides.items())
    if unknown and unknown == len(planned) - len(matches):
        when = "time unknown"
    elif unknown:
        when = f"about {_duration(total_s)} one after another for the others"
    else:
        when = f"about {_duration(total_s)} one after another"
    print(f"{_count(base, planned)}, {when}{'; every run also gets ' + common if common else ''}")
    for note_ in base.notes:  # SCALE_ITERS's scaling
        print(note_)
    if unknown:
        where = gpu or base.DEVICE
        print(
            f"time: unknown for {counted(unknown, 'run')}: no speed is known for "
            f"DEVICE={where} on this machine; GPU=<name> estimates for a known GPU "
            f"(`make test-matrix-dry-run GPU=H100`)"
        )
    elsewhere = _elsewhere(verdicts, total_s, gpu)
    if elsewhere:
        print(elsewhere)
    if any(estimates):
        print(
            f"time: an estimate of each run's whole process, start-up included, "
            f"{time_basis(estimates)}"
        )
    if matches:
        print(
            f"{counted(len(matches), 'run')} reused from earlier runs with the same fingerprint "
            f"(<- its folder), saving about {_duration(saved_s)}; REUSE=n trains them again"
        )
    if note:
        print(note)
    if base.MATRIX_TUNE:  # the tuning stage's budget and time (lib/tune/)
        from lib.tune.forecast import lines

        tune_lines, tune_s = lines(base, planned, completed, info)
        print("\n".join(tune_lines))
        if tune_s is not None and not unknown:
            print(f"in all, tuning and runs: about {_duration(tune_s + total_s)}")
    print("memory: estimated training peak per device (`make estimate` explains one run)")
    if base.MATRIX_EXECUTOR == "slurm":  # each run is a job of its own: nothing to pack
        return
    trained = [p for p in planned if p.run_id not in matches]
    placer = packing.build(base, {p.run_id: p.config for p in trained})
    placer.check()
    for line in packing_lines(base, placer, [p.run_id for p in trained]):
        print(line)


def packing_lines(base: RunConfig, placer: packing.Packer, run_ids: list[str]) -> list[str]:
    """Which runs start at once on which GPU, and how many follow."""
    setting = f"MATRIX_RUNS_PER_GPU={(base.MATRIX_RUNS_PER_GPU or '1').strip()}"
    wave = placer.first_wave(run_ids)
    later = len(run_ids) - len(wave.where)
    starts = "starts" if later == 1 else "start"
    then = [f"  the other {counted(later, 'run')} {starts} as places free up"] if later else []
    if not placer.gpus:
        return [
            f"runs at a time: {placer.most_at_once} (no GPU here; PARALLEL_JOBS= changes it)"
        ] + then
    names = sorted({f"{g.name} ({g.memory_bytes / packing.GIB:.1f} GiB)" for g in placer.gpus})
    lines = [
        f"packing ({setting}): {len(placer.gpus)} GPU(s), {', '.join(names)}; "
        + (
            f"runs sharing a GPU fill at most {placer.margin:.0%} of it by their estimates "
            f"(+{FIT_MARGIN:.0%} and the CUDA context each); "
            if placer.by_memory
            else ""
        )
        + f"up to {placer.most_at_once} at a time"
    ]
    for g, gpu in enumerate(placer.gpus):
        here = wave.on[g]
        used = f", {wave.used(g) / packing.GIB:.2f} GiB" if placer.by_memory else ""
        lines.append(
            f"  GPU {gpu.visible}: {counted(len(here), 'run')}{used}"
            + (": " + ", ".join(f"{r}{_why(placer.needs.get(r))}" for r in here) if here else "")
        )
    return lines + then


def _why(n: packing.Need | None) -> str:
    return f" [{n.why}]" if n is not None and n.why else ""
