"""`make test-matrix`, `make continue` (of a matrix) and `make test-rerun`.

start(): plan the grid from .config, create results/<matrix-id>/ with
base.config, matrix.json and one folder per run holding the config.txt it
trains with, then train them, except runs an earlier completed run makes
unnecessary (lib/jobs/reuse.py: linked, not trained). resume(): train what
is pending or was interrupted. rerun(): train one run again from scratch,
keeping the old folder beside it, whatever could be reused. Each holds the
matrix folder's owner lock while it runs (lib/run/owner.py), so a second
launcher on the same matrix refuses.
"""

from __future__ import annotations

import contextlib
import difflib
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lib.atomic import write_text_atomic
from lib.config.overrides import split_args
from lib.config.run_config import load_run_config
from lib.jobs import PlannedRun, packing, reuse, slurm
from lib.jobs.runner import Runner
from lib.jobs.state import MatrixError, MatrixState, is_matrix
from lib.matrix.grid import expand
from lib.paths import DOT_CONFIG as CONFIG
from lib.plural import counted
from lib.run.owner import Busy, describe, owner, owning
from lib.run.rundir import (
    is_name,
    latest_in_the_way,
    point_latest,
    results_root,
    unusable_results_dir,
)
from lib.run.safe_open import LinkRefused
from lib.run.signals import EXIT_RESUMABLE

if TYPE_CHECKING:
    from lib.config.run_config import RunConfig


def create(
    base: RunConfig,
    planned: list[PlannedRun],
    cli_args: list[str],
    now: float | None = None,
    sweep: dict | None = None,
) -> MatrixState:
    """The matrix folder, its records and each run's folder with config.txt."""
    kind = "sweep" if sweep else "matrix"
    matrix_id = f"{kind}_" + time.strftime("%Y%m%d-%H%M%S", time.localtime(now))
    root = results_root(base.run) / matrix_id
    refused = latest_in_the_way(root.parent)  # before anything is made
    if refused:
        raise MatrixError(refused)
    if root.exists():
        raise MatrixError(f"{root} already exists; wait a second and start again")
    try:
        root.mkdir(parents=True)
    except OSError as err:  # a file, /proc, a read-only or full disk: one paragraph
        raise MatrixError(
            unusable_results_dir(base.RESULTS_DIR, root, "matrix folder", err)
        ) from None
    write_text_atomic(root / "base.config", base.config_text)  # .config + matrix-wide overrides
    for p in planned:
        (root / p.run_id).mkdir()
        write_text_atomic(root / p.run_id / "config.txt", p.config.config_text)
    overrides, _, _ = split_args(cli_args)
    state = MatrixState.create(
        root,
        matrix_id,
        {p.run_id: p.args for p in planned},
        dict(overrides),
        base.MATRIX_PARALLEL_JOBS,
    )
    if sweep:
        state.data["sweep"] = sweep
    if base.MATRIX_TUNE:  # the configurations a tuning stage searches first (lib/tune/)
        from lib.tune.stage import plan

        state.data["tune"] = plan(planned)
    state.save()
    point_latest(root)
    return state


def start(
    cli_args: list[str],
    confirm: Callable[[str], bool],
    show: Callable[[Any, list[PlannedRun]], None],
    sweep: Any = None,
    path: Path = CONFIG,
    one: bool = False,
) -> int:
    """Plan, confirm, create and train a matrix (a sweep when `sweep` is given);
    one: `make tune`, which takes a single configuration (its seeds allowed)."""
    base, planned = expand(cli_args, path, points=sweep.points() if sweep else None)
    if one:
        _one_configuration(base, planned)
    if base.MATRIX_TUNE:  # some configuration has a symbol to tune
        from lib.tune.stage import check

        check(base, planned)
    show(base, planned)
    slurm_dry = base.flags["DRY_RUN"] and base.MATRIX_EXECUTOR == "slurm"
    if base.flags["DRY_RUN"] and not slurm_dry:
        return 0
    if slurm_dry:  # write the matrix and its scripts, print them, submit nothing
        state = create(base, planned, cli_args, sweep=sweep.record() if sweep else None)
        slurm.submit(
            state, [p.run_id for p in planned], {p.run_id: p.config for p in planned}, dry_run=True
        )
        print(f"[slurm] scripts written under {state.root}; `make continue` submits them")
        if base.MATRIX_TUNE:
            print(
                "[tune] `make continue` first runs the tuning stage (its trials as jobs), "
                "then sets these runs to their best values and submits them"
            )
        return 0
    if not base.flags["YES"] and not confirm(f"Start {counted(len(planned), 'run')}? [y/N] "):
        print("nothing started")
        return 1
    state = create(base, planned, cli_args, sweep=sweep.record() if sweep else None)
    print(f"matrix {state.root}")
    with own(state.root):
        code = tune(state, base)
        if code:
            return code
        return train(state, base, [p.run_id for p in planned], cli_args=[])


def _one_configuration(base: RunConfig, planned: list[PlannedRun]) -> None:
    from lib.tune.stage import plan

    configs = list(plan(planned)["configs"])
    if not base.MATRIX_TUNE:
        raise MatrixError("`make tune` with TUNE=n tunes nothing: name the symbols, e.g. TUNE=LR")
    if len(configs) > 1:
        raise MatrixError(
            f"`make tune` tunes the one configuration in .config, and this one makes "
            f"{len(configs)} ({', '.join(configs[:4])}{', ...' if len(configs) > 4 else ''}): "
            f"`make test-matrix TUNE=...` tunes each of a matrix's configurations, or choose "
            f"one of each in `make menuconfig`"
        )


def tune(state: MatrixState, base: RunConfig) -> int:
    """The tuning stage, when the matrix has one (MATRIX_TUNE): every configuration's
    study, then its runs set to its best values (lib/tune/stage.py)."""
    if not state.data.get("tune"):
        return 0
    from lib.tune import stage

    try:
        return stage.run(state, base)
    except KeyboardInterrupt:  # Ctrl-C between trials (during one, the runner handles it)
        print("[tune] interrupted: `make continue` resumes the search")
        return EXIT_RESUMABLE


def train(
    state: MatrixState,
    base: RunConfig,
    run_ids: list[str],
    cli_args: list[str],
    reuse_earlier: bool = True,
) -> int:
    """Train run_ids here, or submit them as Slurm jobs (MATRIX_EXECUTOR_SLURM);
    first link in earlier completed runs that make some unnecessary (lib/jobs/reuse.py)."""
    configs = {r: load_run_config(list(cli_args), state.root / r / "config.txt") for r in run_ids}
    if reuse_earlier:
        run_ids = reuse.apply(state, configs, run_ids)
        configs = {r: configs[r] for r in run_ids}
    if base.MATRIX_EXECUTOR == "slurm":
        if slurm.submit(state, run_ids, configs):
            print("[slurm] `make watch` follows them; `make continue` resubmits interrupted runs")
        return 0
    # Which GPU each run gets (MATRIX_RUNS_PER_GPU); a run too big for every GPU stops all here.
    placer = packing.build(base, configs)
    placer.check()
    state.data["runs_at_once"] = placer.most_at_once  # `make watch` lays out the rest by it
    state.save()
    runner = Runner(state, placer, extra_args=cli_args)
    runner.run_all(run_ids)
    counts, linked = state.counts(), reuse.reused(state)
    print(
        "[matrix] "
        + ", ".join(f"{n} {s}" for s, n in counts.items() if n)
        + (f" ({linked} of them reused)" if linked else "")
        + f" ({state.root})"
    )
    if runner.interrupted:
        print("[matrix] interrupted: `make continue` resumes it")
        return EXIT_RESUMABLE  # as train.py: stopped, resume it
    return 0 if counts["failed"] == counts["diverged"] == 0 else 1


@contextlib.contextmanager
def own(root: Path) -> Iterator[None]:
    """This process launches the matrix for the block; one launcher at a time
    (a second would start the same pending runs again), so a second refuses."""

    def busy(holder: dict[str, Any]) -> str:
        pid = holder.get("pid") or "<pid>"
        return (
            f"the matrix {root.name} is being trained by {describe(holder)}: a matrix has "
            f"one launcher at a time, and a second would train the same pending runs again. "
            f"Wait for it to finish (`make watch` follows it), or stop it (Ctrl-C in its "
            f"terminal, or `kill {pid}`: its runs save checkpoints) and run `make "
            f"continue` again"
        )

    try:
        with owning(root, busy):
            yield
    except (Busy, LinkRefused) as err:
        raise MatrixError(str(err)) from None


def find(results: Path, name: str | None = None) -> Path:
    if name and not is_name(name):
        raise MatrixError(
            f'MATRIX="{name}" is not a matrix name: give the name of a folder '
            f"under {results} (letters, digits, '.', '_' and '-'), not a path"
        )
    path = (results / name) if name else (results / "latest")
    if not is_matrix(path):
        what = f"'{name}'" if name else "results/latest"
        raise MatrixError(
            f"{what} under {results} is not a test matrix (no matrix.json); "
            f"start one with `make test-matrix`"
        )
    return path.resolve()


def resume(root: Path, cli_args: list[str], retry_failed: bool) -> int:
    """Train what is pending or was interrupted; runs a live process still
    trains (a cluster job, a `make continue` of that run) are left to it."""
    with own(root):
        state = MatrixState.load(root)
        base = load_run_config([], root / "base.config")
        if base.MATRIX_EXECUTOR == "slurm":  # jobs that ended without recording it
            slurm.reconcile(state)
        code = tune(state, base)  # a search not finished goes on; finished trials stay
        if code:
            return code
        state = MatrixState.load(root)  # the stage set the runs' tuned values
        live = state.live()
        todo = state.to_run(retry_failed, live)
        skipped = [
            r
            for r, v in state.runs.items()
            if v["state"] in ("failed", "diverged") and r not in todo and r not in live
        ]
        print(
            f"[matrix] {root.name}: {len(todo)} to run, "
            f"{state.counts()['completed']} completed and skipped"
            + (
                f", {len(skipped)} failed/diverged kept (RETRY_FAILED=1 retries them)"
                if skipped
                else ""
            )
        )
        for run_id, holder in live.items():
            print(f"[matrix] {run_id}: skipped, its owner is alive: {describe(holder)}")
        if cli_args:
            state.data.setdefault("continue_overrides", []).append(cli_args)
            state.save()
        return train(state, base, todo, cli_args)


def rerun(root: Path, run_id: str, cli_args: list[str]) -> int:
    """Train run_id again from scratch; the old folder becomes <run_id>.prev-<time>."""
    with own(root):
        state = MatrixState.load(root)
        if run_id not in state.runs:
            near = difflib.get_close_matches(run_id, list(state.runs), n=1)
            hint = f"did you mean '{near[0]}'? " if near else ""
            raise MatrixError(
                f"no run '{run_id}' in {root.name}; {hint}its runs: {', '.join(state.runs)}"
            )
        old = root / run_id
        holder = owner(old) if old.is_dir() else None
        if holder is not None:
            raise MatrixError(
                f"{run_id} is being trained by {describe(holder)}: wait for it, "
                f"or stop it (`kill {holder.get('pid')}`), then rerun it"
            )
        if old.exists():
            old.rename(root / f"{run_id}.prev-{time.strftime('%Y%m%d-%H%M%S')}")
        run = load_run_config(state.runs[run_id]["overrides"] + cli_args, root / "base.config")
        old.mkdir()
        write_text_atomic(old / "config.txt", run.config_text)
        state.update(run_id, state="pending", attempts=0, reused_from=None, fingerprint=None)
        base = load_run_config([], root / "base.config")
        return train(state, base, [run_id], cli_args=[], reuse_earlier=False)  # forced


def job(run_dir: Path, launcher: list[str], cli_args: list[str]) -> int:
    """A cluster job's body: train one run and record its state like a local run."""
    run_dir = run_dir.resolve()
    state = MatrixState.load(run_dir.parent)
    state.update(run_dir.name, note=None)  # "submitted as job N": it runs now
    runner = Runner(state, extra_args=cli_args, launcher=launcher)
    result = runner.run_one(run_dir.name, {})
    return 0 if result["state"] in ("completed", "pending") else 1


def outputs(run_dir: Path, what: tuple[str, ...]) -> int:
    """What a reused run lacks, with the settings its matrix asked for
    (base.config and the run's overrides), into the folder its link leads to."""
    from lib.jobs.outputs import produce

    root = run_dir.absolute().parent
    entry = MatrixState.load(root).runs.get(run_dir.name)
    if entry is None:
        raise MatrixError(f"no run '{run_dir.name}' in {root}")
    produce(load_run_config(list(entry["overrides"]), root / "base.config"), run_dir, what)
    return 0


def ask(prompt: str) -> bool:
    if not sys.stdin.isatty():
        print(f"{prompt}no terminal to answer; add YES=1 to start without asking")
        return False
    return input(prompt).strip().lower() in ("y", "yes")
