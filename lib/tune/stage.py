"""The tuning stage of a matrix (MATRIX_TUNE): search each configuration's best
values, then set its runs to them.

A configuration is a grid point without its seed; its trials are short runs
(MATRIX_TUNE_FRACTION of GPT2_MAX_ITERS, TRAIN_SEED as configured, the
trial's values as overrides) in <matrix>/tune/<configuration>/trial-NNN/, a
small matrix of their own (its matrix.json), so they are trained like any
run: fingerprinted and reused when identical (lib/jobs/reuse.py), several
at once or several per GPU (lib/jobs/packing.py, runner.py), or as Slurm
jobs (lib/jobs/slurm.py). Optuna's ask/tell drives them: the stage asks the
study for as many trials as can train at once, each trial process reports its
validation losses to the study itself (lib/train/trial.py), and the stage
tells the study how each ended (complete, pruned, or fail), then rewrites
tuning.json (lib/tune/record.py). Failed trials are tried again with new
values; a trial left running by a killed search is marked failed when the
search continues (`make continue`), and finished trials are never repeated.
Last, each configuration's runs get its best values as overrides, and
matrix.json's "tuned" names them and the tuning.json they came from.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lib.atomic import write_text_atomic
from lib.config.kconfig import ConfigError
from lib.config.run_config import load_run_config
from lib.jobs import packing, reuse, slurm
from lib.jobs.runner import Runner
from lib.jobs.state import FILE as MATRIX_FILE
from lib.jobs.state import MatrixError, MatrixState
from lib.run.rundir import results_root
from lib.run.signals import EXIT_RESUMABLE
from lib.tune import record, space
from lib.tune import trial as trial_io
from lib.tune.budget import Budget
from lib.tune.study import open_study, storage_url, study_name, trial_count

if TYPE_CHECKING:
    from lib.config.run_config import RunConfig
    from lib.jobs import PlannedRun

TUNE_DIR = "tune"
SLURM_POLL_S = 30


def plan(planned: list[PlannedRun]) -> dict[str, Any]:
    """matrix.json's "tune": each configuration's overrides (without the seed) and runs."""
    configs: dict[str, dict[str, Any]] = {}
    for p in planned:
        seed = dict(p.overrides).get("TRAIN_SEED")
        config_id = re.sub(rf"_s{seed}$", "", p.run_id) if seed else p.run_id
        entry = configs.setdefault(
            config_id,
            {"overrides": [f"{k}={v}" for k, v in p.overrides if k != "TRAIN_SEED"], "runs": []},
        )
        entry["runs"].append(p.run_id)
    return {"configs": configs}


def check(base: RunConfig, planned: list[PlannedRun]) -> None:
    """At least one configuration has a symbol to tune (each is hidden in some,
    e.g. MUON_LR in AdamW's), else say why each is hidden; and a grid gives every
    configuration the same number of trials. Before anything runs."""
    budget = Budget.from_run(base)
    text, steps = base.MATRIX_TUNE_SYMBOLS or "", budget.steps
    dims = {p.run_id: space.parse(text, p.config.values, True, steps) for p in planned}
    if not any(dims.values()):
        space.parse(text, planned[0].config.values, trial_steps=steps)  # names each hidden
    if budget.sampler == "grid":
        _equal_grids(budget, {run: d for run, d in dims.items() if d})


def _equal_grids(budget: Budget, dims: dict[str, list[space.Dimension]]) -> None:
    """A grid has k**d points for d tuned symbols, at most MATRIX_TUNE_TRIALS: with
    8 trials one symbol gets 8 and two get 4 (2 x 2), an unequal comparison."""
    counts = {run: (trial_count(budget, d), len(d)) for run, d in dims.items()}
    if len({count for count, _ in counts.values()}) < 2:
        return
    sizes = sorted({n for _, n in counts.values()})
    fits = next(
        (n for n in range(budget.trials, 100_000) if all(_is_power(n, k) for k in sizes)), None
    )
    trials = (
        f"MATRIX_TUNE_TRIALS={fits} (a full grid for each)"
        if fits
        else "every configuration the same number of tuned symbols"
    )
    shown = {f"{count} for {n} symbol{'s' * (n > 1)} ({run})" for run, (count, n) in counts.items()}
    raise ConfigError(
        [
            f"CONFIG_MATRIX_TUNE_SAMPLER_GRID with {budget.trials} trials gives the "
            f"configurations different budgets: {', '.join(sorted(shown))}; a grid has k**d "
            f"points for d tuned symbols. Give {trials} or the TPE sampler, which runs every "
            f"configuration's budget"
        ],
        "tuning",
    )


def _is_power(n: int, k: int) -> bool:
    root = round(n ** (1 / k))
    return any((root + d) ** k == n for d in (-1, 0, 1))


def trial_args(base: RunConfig, config_args: list[str], budget: Budget) -> list[str]:
    """A trial's overrides before its values: short, one fixed seed, not tuned
    itself, evaluated often enough for the pruner (lib/tune/budget.py)."""
    return [
        *config_args,
        f"TRAIN_SEED={base.TRAIN_SEED}",
        f"GPT2_MAX_ITERS={budget.steps}",
        *(
            [f"GPT2_EVAL_INTERVAL={budget.eval_interval}"]
            if budget.eval_interval != base.GPT2_EVAL_INTERVAL
            else []
        ),
        "MATRIX_TUNE=n",
    ]


def run(state: MatrixState, base: RunConfig, log: Callable[[str], None] = print) -> int:
    """Tune every configuration not yet tuned, then set its runs' values; 0, or
    EXIT_RESUMABLE when a stop signal interrupted it (`make continue` goes on)."""
    for config_id, cfg in state.data["tune"]["configs"].items():
        run = load_run_config(list(cfg["overrides"]), state.root / "base.config")
        steps = Budget.from_run(base).steps
        dims = space.parse(base.MATRIX_TUNE_SYMBOLS or "", run.values, True, steps)
        if not dims:
            log(f"[tune] {config_id}: none of MATRIX_TUNE_SYMBOLS applies to it; not tuned")
            continue
        study = Search(state, base, config_id, cfg, dims, log)
        if study.search():
            log(f"[tune] interrupted: `make continue` resumes the search of {config_id}")
            return EXIT_RESUMABLE
        study.apply()
    return 0


class Search:
    """One configuration's study and the trials that feed it."""

    def __init__(
        self,
        state: MatrixState,
        base: RunConfig,
        config_id: str,
        cfg: dict[str, Any],
        dims: list[space.Dimension],
        log: Callable[[str], None],
    ):
        self.state, self.base, self.config_id, self.cfg = state, base, config_id, cfg
        self.dims, self.log = dims, log
        self.root = state.root
        self.dir = self.root / TUNE_DIR / config_id
        self.dir.mkdir(parents=True, exist_ok=True)
        self.budget = Budget.from_run(base)
        configured = base.MATRIX_TUNE_STORAGE or ""
        self.url = storage_url(configured, self.root / TUNE_DIR)
        self.study = open_study(
            study_name(config_id, configured, state.data["matrix_id"]),
            self.url,
            self.budget,
            self.dims,
        )
        self.total = trial_count(self.budget, self.dims)
        self.trials = self._trial_state()
        self.asked: dict[str, Any] = {}  # run id -> its optuna Trial

    def _trial_state(self) -> MatrixState:
        if (self.dir / MATRIX_FILE).is_file():
            return MatrixState.load(self.dir)
        matrix_id = f"{self.state.data['matrix_id']}/{TUNE_DIR}/{self.config_id}"
        return MatrixState.create(self.dir, matrix_id, {}, {}, self.base.MATRIX_PARALLEL_JOBS)

    def _done(self) -> int:
        """Finished trials: complete, pruned, and failed ones that are not retried
        (refused values, divergence: new values would fare no better)."""
        finals = {"COMPLETE", "PRUNED"}
        kept = sum(
            1
            for t in self.study.get_trials(deepcopy=False)
            if t.state.name == "FAIL" and t.user_attrs.get("final_failure")
        )
        return kept + sum(
            1 for t in self.study.get_trials(deepcopy=False) if t.state.name in finals
        )

    def search(self) -> bool:
        """Run trials until the budget is spent; True when interrupted."""
        self._settle_left_running()
        failures = 0
        while (done := self._done()) < self.total:
            if failures > self.total:
                raise MatrixError(
                    f"tuning {self.config_id}: {failures} trials failed (each trial's "
                    f"console.log under {self.dir} says why); fix the cause, then `make "
                    f"continue`: the search goes on from the trials it finished"
                )
            at_once = self._at_once()
            self.trials.data["runs_at_once"] = at_once  # `make watch` lays out the rest by it
            batch = self._ask(min(at_once, self.total - done))
            interrupted = self._train(batch)
            failures += sum(1 for r in batch if self._tell(r) == "fail")
            self._write()
            if interrupted:
                return True
        self._write()
        return False

    def _at_once(self) -> int:
        if self.base.MATRIX_EXECUTOR == "slurm":
            return self.base.MATRIX_PARALLEL_JOBS or self.total
        probe = load_run_config(
            trial_args(self.base, self.cfg["overrides"], self.budget), self.root / "base.config"
        )
        return packing.build(self.base, {"trial": probe}).most_at_once

    def _ask(self, count: int) -> list[str]:
        """Ask the study for `count` trials; write each one's folder."""
        ids: list[str] = []
        for _ in range(count):
            trial = self.study.ask()
            values = {d.name: d.suggest(trial) for d in self.dims}
            run_id = f"trial-{trial.number:03d}"
            trial.set_user_attr("run_dir", f"{TUNE_DIR}/{self.config_id}/{run_id}")
            args = trial_args(self.base, self.cfg["overrides"], self.budget) + [
                f"{d.name}={d.text(values[d.name])}" for d in self.dims
            ]
            self.trials.data["runs"][run_id] = {
                "state": "pending",
                "overrides": args,
                "attempts": 0,
            }
            self.trials.save()
            (self.dir / run_id).mkdir(exist_ok=True)
            self.asked[run_id] = trial
            try:
                config = load_run_config(args, self.root / "base.config")
            except ConfigError as err:  # e.g. a warmup longer than the trial: not retried
                self.trials.update(run_id, state="failed", error=str(err))
                trial.set_user_attr("final_failure", True)
                self.study.tell(trial, state=trial_io.state("FAIL"))
                self.log(f"[tune] {self.config_id}/{run_id}: refused: {err}")
                continue
            write_text_atomic(self.dir / run_id / "config.txt", config.config_text)
            ids.append(run_id)
        return ids

    def _train(self, ids: list[str]) -> bool:
        configs = {
            r: load_run_config(list(self.trials.runs[r]["overrides"]), self.root / "base.config")
            for r in ids
        }
        matches, _ = reuse.find(configs, results_root(self.base.run))
        for run_id, match in matches.items():
            reuse.link(self.trials, run_id, match)
            self.log(f"[tune] {self.config_id}/{run_id}: reused {match.name}")
        todo = [r for r in ids if r not in matches]
        for run_id in todo:
            trial_io.write_spec(
                self.dir / run_id, self.url, self.study, self.asked[run_id], self.budget
            )
        if self.base.MATRIX_EXECUTOR == "slurm":
            return self._train_on_slurm(todo, configs)
        placer = packing.build(self.base, {r: configs[r] for r in todo})
        placer.check()
        runner = Runner(self.trials, placer, echo=False, log=self._runner_log)
        runner.run_all(todo)
        return runner.interrupted

    def _runner_log(self, line: str) -> None:
        if line.endswith(": completed"):  # _tell says how: complete or pruned
            return
        self.log(line.replace("[matrix] ", f"[tune] {self.config_id}/", 1))

    def _train_on_slurm(self, ids: list[str], configs: dict[str, RunConfig]) -> bool:
        """Submit the trials as jobs and wait for them here (this process tells
        the study how each ended)."""
        slurm.submit(self.trials, ids, configs)
        while True:
            queued = slurm.queued_jobs()
            self.trials = MatrixState.load(self.dir)
            if not any(self.trials.runs[r].get("slurm_job") in queued for r in ids):
                break
            time.sleep(SLURM_POLL_S)
        slurm.reconcile(self.trials)
        self.trials = MatrixState.load(self.dir)
        return False

    def _tell(self, run_id: str) -> str:
        """Tell the study how the trial's run ended (lib/tune/trial.py); log it."""
        trial, entry = self.asked[run_id], MatrixState.load(self.dir).runs[run_id]
        outcome = trial_io.tell(self.study, trial, self.dir / run_id, entry, self.budget.metric)
        if outcome != "interrupted":
            best = record.best_trial(self.study)
            self.log(
                f"[tune] {self.config_id}/{run_id}: {outcome} "
                + " ".join(f"{k}={v:.4g}" for k, v in trial.params.items())
                + (f" (best so far {best.value:.4f}, trial {best.number})" if best else "")
            )
        return outcome

    def _settle_left_running(self) -> None:
        """Trials a killed search left running: told from their run when it
        finished, else marked failed (a new trial takes its place)."""
        import optuna

        live = self.trials.live()
        for frozen in self.study.get_trials(deepcopy=False, states=(trial_io.state("RUNNING"),)):
            run_id = Path(frozen.user_attrs.get("run_dir", "")).name
            if run_id in live:
                continue
            trial = optuna.trial.Trial(self.study, frozen._trial_id)
            self.asked[run_id] = trial
            if run_id not in self.trials.runs:  # asked, but its folder never written
                self.study.tell(trial, state=trial_io.state("FAIL"))
                continue
            if self._tell(run_id) == "interrupted":
                self.study.tell(trial, state=trial_io.state("FAIL"))
                if run_id in self.trials.runs:
                    self.trials.update(
                        run_id,
                        state="failed",
                        error="the search was stopped while this trial trained; "
                        "a new trial took its place",
                    )
                self.log(
                    f"[tune] {self.config_id}/{run_id}: left running by a stopped search: failed"
                )

    def _write(self) -> None:
        record.write(
            self.dir / record.FILE,
            record.build(
                self.study,
                self.config_id,
                self.url,
                self.dims,
                self.budget,
                self.total,
                self.root,
            ),
        )

    def apply(self) -> None:
        """Each of the configuration's runs not yet started trains at the best values."""
        best = record.best_trial(self.study)
        if best is None:
            self.log(
                f"[tune] {self.config_id}: no trial completed; its runs keep the configured values"
            )
            return
        by_name = {d.name: d for d in self.dims}
        words = [f"{k}={by_name[k].text(v)}" for k, v in best.params.items()]
        for run_id in self.cfg["runs"]:
            entry = self.state.runs[run_id]
            if entry.get("tuned") or entry["state"] != "pending" or entry.get("attempts"):
                continue
            args = list(entry["overrides"]) + words
            config = load_run_config(args, self.root / "base.config")
            write_text_atomic(self.root / run_id / "config.txt", config.config_text)
            self.state.update(
                run_id,
                overrides=args,
                tuned={
                    "values": dict(best.params),
                    "value": best.value,
                    "trial": best.number,
                    "tuning": f"{TUNE_DIR}/{self.config_id}/{record.FILE}",
                },
            )
        self.log(f"[tune] {self.config_id}: best {best.value:.4f} at {' '.join(words)}")
