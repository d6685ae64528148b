"""A tuned matrix's studies, as the results show them.

The tuning stage writes `<matrix>/tune/<config>/tuning.json` after every trial
(the search ranges, the budget, each trial's state and loss, the best trial)
and keeps the Optuna study in `<matrix>/tune/study.db`. Here each record is
read and checked (lib/run/record_model.py): a file that does not parse or has a
field of the wrong shape is left out with a one-line problem naming it, never
an exception. From a record come the tuned values, the trial counts, the
best-so-far curve, and the symbols whose best value sits at an end of its
search range. cross_check() compares the records with the SQLite study where
Optuna can read it; a disagreement is a problem too.

Below the reading, the tuning table in Markdown, CSV and LaTeX, and its cells
for the HTML report: per configuration the tuned values, the search ranges, the
trials complete, pruned and failed (and running, while any is), the best
trial's loss, and the symbols whose best value hit an end of their range. The
budget, the same for every configuration, is stated once above the table.
"""

from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lib.results import tables
from lib.results.collect import TUNE_DIR, RunRow
from lib.run.record_model import TuningRecord, problems_of, reason, shown

RECORD = "tuning.json"
DATABASE = "study.db"
# A best value in the outer EDGE of its range (of the log range for a log
# symbol) "hit the edge": the optimum may lie outside what was searched.
EDGE = 0.05


@dataclass(frozen=True)
class Symbol:
    """One searched symbol: its range, and the best value found (None before
    the first complete trial)."""

    name: str
    low: float
    high: float
    log: bool
    best: float | None

    def position(self) -> float | None:
        """Where the best value lies in the range: 0 at low, 1 at high."""
        if self.best is None:
            return None
        if self.log:
            span = math.log(self.high) - math.log(self.low)
            return (math.log(max(self.best, self.low)) - math.log(self.low)) / span
        return (self.best - self.low) / (self.high - self.low)

    @property
    def edge(self) -> str | None:
        """ "low" or "high" where the best value is within EDGE of that end."""
        at = self.position()
        if at is None:
            return None
        return "low" if at <= EDGE else "high" if at >= 1 - EDGE else None


@dataclass(frozen=True)
class Trial:
    number: int
    state: str  # complete, pruned, fail or running (record_model.TRIAL_STATES)
    value: float | None  # the final loss; a pruned trial's last reported one
    steps: int | None
    params: dict[str, float] = field(default_factory=dict)  # its tuned values


@dataclass(frozen=True)
class Curve:
    """best: (trial number, best loss so far) at each complete trial, never
    rising; pruned: (trial number, its last reported loss) of each pruned trial
    that reported one. Failed and running trials are in neither."""

    best: list[tuple[int, float]]
    pruned: list[tuple[int, float]]


@dataclass
class Study:
    """One configuration's tuning record."""

    path: Path
    config: str
    study: str | None
    storage: str | None
    symbols: list[Symbol]
    budget: dict[str, Any]
    trials: list[Trial]
    best_value: float | None
    best_trial: int | None

    def count(self, state: str) -> int:
        return sum(t.state == state for t in self.trials)

    @property
    def tuned(self) -> dict[str, float]:
        return {s.name: s.best for s in self.symbols if s.best is not None}

    @property
    def edges(self) -> list[Symbol]:
        return [s for s in self.symbols if s.edge]

    def curve(self) -> Curve:
        best: list[tuple[int, float]] = []
        pruned = []
        for t in sorted(self.trials, key=lambda t: t.number):
            if t.value is None or not math.isfinite(t.value):
                continue
            if t.state == "complete":
                best.append((t.number, min(t.value, best[-1][1]) if best else t.value))
            elif t.state == "pruned":
                pruned.append((t.number, t.value))
        return Curve(best, pruned)


@dataclass
class Tuning:
    """Every readable study of a folder, and a line per problem found."""

    studies: list[Study] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.studies)


def _study(path: Path, record: dict[str, Any]) -> Study:
    best = record.get("best") or {}
    return Study(
        path,
        record["config"],
        record.get("study"),
        record.get("storage"),
        [
            Symbol(s["name"], s["low"], s["high"], bool(s.get("log")), s.get("best"))
            for s in record["symbols"]
        ],
        record["budget"],
        [
            Trial(
                t["number"],
                t["state"],
                t.get("value"),
                t.get("steps"),
                {k: v for k, v in (t.get("params") or {}).items() if isinstance(v, int | float)},
            )
            for t in record["trials"]
        ],
        best.get("value"),
        best.get("trial"),
    )


def _consistency(study: Study) -> list[str]:
    """A best that no complete trial reached is a record out of step with itself."""
    done = [t.value for t in study.trials if t.state == "complete" and t.value is not None]
    if study.best_value is None or not done or math.isclose(min(done), study.best_value):
        return []
    return [
        f"{shown(study.path)}: best.value {study.best_value:g} is not the lowest loss of its "
        f"complete trials ({min(done):g}); the record may be from an older trial"
    ]


def read(root: Path) -> Tuning:
    """The studies under root/tune/ (none for an untuned folder), in name order."""
    found = Tuning()
    for path in sorted(Path(root, TUNE_DIR).glob(f"*/{RECORD}")):
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError) as err:
            found.problems.append(
                f"{shown(path)}: not readable as JSON ({str(err).splitlines()[0]}); "
                f"its configuration's tuning is not shown"
            )
            continue
        problems = problems_of(TuningRecord, path, record)
        if problems:
            found.problems.append(reason(problems) + "; its configuration's tuning is not shown")
            continue
        study = _study(path, record)
        found.problems += _consistency(study)
        found.studies.append(study)
    if len(shared := budgets(found)) > 1:
        found.problems.append(
            "the configurations were tuned with different budgets, so the comparison is not "
            "at an equal budget: " + "; ".join(f"{b} ({', '.join(c)})" for b, c in shared.items())
        )
    return found


def stale_runs(tuning: Tuning, rows: list[RunRow]) -> list[str]:
    """A line per final run whose tuned values are not its study's best now
    (the study went on after the run was trained)."""
    best = {s.config: s.tuned for s in tuning.studies}
    out = []
    for r in rows:
        study = best.get(r.config_key)
        if not r.tuned or not study:
            continue
        differ = [
            f"{k}={v:.4g} (the study's best is now {study[k]:.4g})"
            for k, v in r.tuned.items()
            if k in study and not math.isclose(v, study[k], rel_tol=1e-6)
        ]
        if differ:
            out.append(f"{r.run_id} ran at {', '.join(differ)}: its study went on after it")
    return out


def load(root: Path) -> Tuning:
    """read(root), with the SQLite study's disagreements among its problems."""
    found = read(root)
    found.problems += cross_check(root, found)
    return found


SAMPLERS = {"tpe": "TPE", "grid": "grid", "random": "random", "cmaes": "CMA-ES"}
PRUNERS = {
    "successive_halving": "successive-halving",
    "hyperband": "Hyperband",
    "median": "median",
    "none": "no",
    "nop": "no",
}


def budget_text(budget: dict[str, Any]) -> str:
    """ "8 trials x 40 steps (20 % of MAX_ITERS), TPE sampler (seed 0),
    successive-halving pruner"."""
    fraction = budget.get("fraction_of_max_iters")
    share = f" ({100 * fraction:g} % of MAX_ITERS)" if fraction is not None else ""
    sampler = SAMPLERS.get(budget.get("sampler", ""), budget.get("sampler", "?"))
    seed = f" (seed {budget['seed']})" if budget.get("seed") is not None else ""
    pruner = PRUNERS.get(budget.get("pruner", ""), budget.get("pruner", "?"))
    per_char = budget.get("metric") == "val_loss_per_char"  # TUNE_METRIC
    return (
        f"{budget.get('trials')} trial{'' if budget.get('trials') == 1 else 's'} x "
        f"{budget.get('steps_per_trial')} steps{share}, "
        f"{sampler} sampler{seed}, {pruner} pruner"
        + (", on the validation loss per character" if per_char else "")
    )


def budgets(tuning: Tuning) -> dict[str, list[str]]:
    """Budget text -> the configurations tuned with it; one entry when the
    budget was the same for all, as a fair comparison needs."""
    out: dict[str, list[str]] = {}
    for s in tuning.studies:
        out.setdefault(budget_text(s.budget), []).append(s.config)
    return out


def cross_check(root: Path, tuning: Tuning) -> list[str]:
    """Where Optuna is importable and root/tune/study.db exists: for each study,
    a line where the database's trial counts or best value differ from
    tuning.json's. A database on a server (a cluster's URL) is not contacted."""
    database = Path(root, TUNE_DIR, DATABASE)
    if not tuning.studies or not database.is_file():
        return []
    try:
        import optuna
    except ImportError:
        return []
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    problems = []
    storage = None
    for s in tuning.studies:
        if s.storage and not s.storage.startswith("sqlite"):
            continue  # a server's database: its study is not the file beside the matrix
        try:
            # The file beside the matrix, whatever path the record names (the
            # matrix may have moved since); opened without creating tables.
            storage = storage or optuna.storages.RDBStorage(
                f"sqlite:///{database.resolve()}", skip_table_creation=True
            )
            study = optuna.load_study(study_name=s.study or s.config, storage=storage)
            trials = study.get_trials(deepcopy=False)
        except Exception as err:  # any failure to read the database is only a warning
            problems.append(
                f"{shown(database)}: study {s.study or s.config!r} not readable "
                f"({str(err).splitlines()[0][:160]}); {shown(s.path)} not cross-checked"
            )
            continue
        problems += _compare(s, database, trials)
    return problems


OPTUNA_STATES = {"COMPLETE": "complete", "PRUNED": "pruned", "FAIL": "fail", "RUNNING": "running"}


def _compare(s: Study, database: Path, trials: list[Any]) -> list[str]:
    """The database's finished-trial counts and best value against the record's."""
    counts = dict.fromkeys(OPTUNA_STATES.values(), 0)
    for t in trials:
        if t.state.name in OPTUNA_STATES:
            counts[OPTUNA_STATES[t.state.name]] += 1
    done = [t.value for t in trials if t.state.name == "COMPLETE" and t.value is not None]
    differ = [
        f"{state} trials {counts[state]} there, {s.count(state)} here"
        for state in ("complete", "pruned", "fail")
        if counts[state] != s.count(state)
    ]
    best = min(done) if done else None
    if (best is None) != (s.best_value is None) or (
        best is not None and s.best_value is not None and not math.isclose(best, s.best_value)
    ):
        differ.append(
            f"best value {best if best is None else f'{best:g}'} there, "
            f"{s.best_value if s.best_value is None else f'{s.best_value:g}'} here"
        )
    if not differ:
        return []
    return [
        f"{shown(s.path)} disagrees with study {s.study or s.config!r} in {shown(database)}: "
        f"{'; '.join(differ)} (a study still running may be a trial ahead of its record)"
    ]


# The tuning table.
CURVE = "tuning_curve.png"
EDGE_NOTE = (
    f"Edge: the best value lies in the outer {100 * EDGE:g} % of its search range (on a log "
    f"scale for a log range), so a better value may lie outside the range searched: widen "
    f"that range and tune again before trusting this configuration's comparison."
)
TUNED_BASELINE = (
    "The runs and seed statistics that follow are the final runs, each configuration at its "
    "tuned values: the baseline is the tuned baseline, so every comparison is tuned against "
    "tuned."
)


def value(x: float) -> str:
    return f"{x:.4g}"


def _tuned(s: Study) -> str:
    return ", ".join(f"{k}={value(v)}" for k, v in s.tuned.items()) or "-"


def _ranges(s: Study) -> str:
    return ", ".join(
        f"{x.name} {value(x.low)} to {value(x.high)}" + (" (log)" if x.log else "")
        for x in s.symbols
    )


def _edge(s: Study) -> str:
    return ", ".join(f"{x.name} at the {x.edge} end" for x in s.edges)


def _best(s: Study) -> str:
    if s.best_value is None:
        return "-"
    trial = f" (trial {s.best_trial})" if s.best_trial is not None else ""
    return f"{s.best_value:.3f}{trial}"


def _running(t: Tuning) -> bool:
    return any(s.count("running") for s in t.studies)


def table_header(t: Tuning) -> list[str]:
    counts = ["complete", "pruned", "failed"] + (["running"] if _running(t) else [])
    return ["configuration", "tuned values", "search range", *counts, "best trial loss", "edge"]


def table_cells(t: Tuning, s: Study, name: str) -> list[str]:
    """One row as plain text, in table_header(t)'s order; name is the configuration's."""
    counts = [s.count("complete"), s.count("pruned"), s.count("fail")]
    counts += [s.count("running")] if _running(t) else []
    return [name, _tuned(s), _ranges(s), *map(str, counts), _best(s), _edge(s)]


def table_intro(t: Tuning) -> str:
    """The budget (once, or each where they differ) and what the table shows."""
    shared = budgets(t)
    if len(shared) == 1:
        budget = f"Every configuration was tuned with the same budget: {next(iter(shared))}."
    else:
        budget = (
            "The budgets differ, so this is not an equal-budget comparison: "
            + "; ".join(f"{b} ({', '.join(c)})" for b, c in shared.items())
            + "."
        )
    running = " Trials still running are counted as such." if _running(t) else ""
    return (
        f"{budget} Best trial loss: the lowest validation loss (nats/token; nats/character "
        f"for a study on the loss per character) of a complete "
        f"trial, a shorter run than the final ones; {CURVE} plots it trial by trial."
        f"{running} {TUNED_BASELINE}"
    )


def table_markdown(t: Tuning, problems: list[str]) -> str:
    """The "## Tuning" section of summary.md; problems are listed under it."""
    warnings = [f"- warning: {p}" for p in problems] + ([""] if problems else [])
    if not t.studies:
        return "\n".join(["## Tuning", "", "No tuning record could be read:", "", *warnings])
    head = table_header(t)
    lines = ["## Tuning", "", table_intro(t), "", "| " + " | ".join(head) + " |"]
    lines.append("|" + "|".join("---" for _ in head) + "|")
    for s in t.studies:
        lines.append(
            "| " + " | ".join(c.replace("|", "/") for c in table_cells(t, s, s.config)) + " |"
        )
    lines += ["", EDGE_NOTE, "", *warnings]
    return "\n".join(lines)


def table_csv(t: Tuning) -> str:
    """summary_tuning.csv: one row per configuration, every number in its own column."""
    names = list(dict.fromkeys(x.name for s in t.studies for x in s.symbols))
    head = [
        "configuration",
        "study",
        "complete",
        "pruned",
        "failed",
        "running",
        "best_loss",
        "best_trial",
        "trials",
        "steps_per_trial",
        "fraction_of_max_iters",
        "sampler",
        "pruner",
        "sampler_seed",
    ]
    for n in names:
        head += [n, f"{n}_low", f"{n}_high", f"{n}_log", f"{n}_edge"]
    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow(head)
    for s in t.studies:
        b = s.budget
        row = [
            s.config,
            s.study,
            s.count("complete"),
            s.count("pruned"),
            s.count("fail"),
            s.count("running"),
            s.best_value,
            s.best_trial,
            b.get("trials"),
            b.get("steps_per_trial"),
            b.get("fraction_of_max_iters"),
            b.get("sampler"),
            b.get("pruner"),
            b.get("seed"),
        ]
        symbols = {x.name: x for x in s.symbols}
        for n in names:
            x = symbols.get(n)
            row += [x.best, x.low, x.high, "y" if x.log else "n", x.edge or ""] if x else [None] * 5
        writer.writerow(
            ["" if v is None else f"{v:.6g}" if isinstance(v, float) else v for v in row]
        )
    return buf.getvalue()


def table_latex(t: Tuning, names: dict[str, str]) -> str:
    """The tuning table (booktabs, a table* over the text width), configurations
    by name; the budget and the edge note in its caption."""
    body = [
        [tables.tex(c) for c in table_cells(t, s, names.get(s.config, s.config))] for s in t.studies
    ]
    caption = tables.tex(f"Tuning. {table_intro(t)} {EDGE_NOTE}")
    return "\n".join(
        tables.tex_table(
            True, [tables.tex(h) for h in table_header(t)], body, caption, "tab:tuning", left=3
        )
    )
