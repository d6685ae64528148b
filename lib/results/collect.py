"""Read run folders into rows for tables and plots, whatever state they are in.

A run folder may be complete, still running, failed, never started (only
config.txt), or damaged (metrics.json missing or malformed): every case gives
a row with a status and, where something is wrong, a problem that says what.
A record that does not parse (truncated), is not a JSON object, or has a field
of the wrong type or shape (its model in lib/run/record_model.py) gives a row with
status "invalid" and the file and field in its problem; its values are not
used. Nothing here raises on a bad run's file; only a matrix.json the whole
folder depends on can stop a summary.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lib.config.kconfig import ConfigError
from lib.config.run_config import load_run_config, value_or
from lib.jobs.state import FILE as MATRIX_FILE
from lib.jobs.state import MatrixError, MatrixState, run_id_problems
from lib.model import registry
from lib.run.eval_record import EVAL_FILE, lm_eval_scores, load_eval
from lib.run.record_model import (
    EvalRecord,
    MetricsRecord,
    check_matrix,
    check_matrix_run,
    problems_of,
    reason,
    shown,
)

TUNE_DIR = "tune"  # <matrix>/tune/: the tuning study and its trial runs
INVALID = "invalid"  # the status of a row whose record has a wrong field
# A run whose figures are a result: the seed table's (lib/results/seeds.py) too.
FINISHED = ("completed", "stopped", "pretrained")
SEED_SUFFIX = re.compile(r"_s(\d+)$")  # a seeded matrix run's id: <configuration>_s<seed>


@dataclass
class RunRow:
    """One run as the summary shows it; None where a value is unknown."""

    run_id: str
    path: Path
    status: str
    model: str | None = None
    optimizer: str | None = None
    pruning: str = "none"
    sparsity_target: float | None = None
    sparsity: float | None = None
    variant: str | None = None
    seed: int | None = None  # TRAIN_SEED from config.txt
    best_loss: float | None = None
    best_ppl: float | None = None
    final_ppl: float | None = None
    tokens_per_sec: float | None = None
    peak_memory_mb: float | None = None
    params: int | None = None
    wall_time_s: float | None = None
    delta_pct: float | None = None  # best perplexity vs the baseline run, in %
    problems: list[str] = field(default_factory=list)
    metrics: dict[str, Any] = field(default_factory=dict)
    evals: dict[str, float] = field(default_factory=dict)  # set name -> perplexity
    scores: dict[str, float] = field(default_factory=dict)  # "<task> <metric>" -> lm-eval score
    bits_per_byte: dict[str, float] = field(default_factory=dict)  # text set -> eval.json's
    word_ppl: dict[str, float] = field(default_factory=dict)  # text set -> word-level perplexity
    measured: dict[str, Any] = field(default_factory=dict)  # eval.json's tokens/s, memory, machine
    overrides: dict[str, str] = field(default_factory=dict)  # a matrix run's, from matrix.json
    reused_from: str | None = None  # matrix.json: the earlier run it links to (lib/jobs/reuse.py)
    tuned: dict[str, float] = field(default_factory=dict)  # symbol -> the tuned value it ran at

    @property
    def config_key(self) -> str:
        """The configuration this run is a seed of: its id less a trailing
        `_s<seed>` naming its own seed (a run id's other `_s<n>` is kept)."""
        m = SEED_SUFFIX.search(self.run_id)
        if m and self.seed is not None and int(m.group(1)) == self.seed:
            return self.run_id[: m.start()]
        return self.run_id

    @property
    def memory_x_weights(self) -> float | None:
        """Peak memory as a multiple of the fp32 weights' size."""
        if not self.peak_memory_mb or not self.params:
            return None
        return self.peak_memory_mb * 2**20 / (4 * self.params)


def _finite(x: Any) -> float | None:
    return float(x) if isinstance(x, (int, float)) and math.isfinite(x) else None


def _invalid(row: RunRow, problems: list[str]) -> None:
    row.status = INVALID
    row.problems.insert(0, reason(problems))


def _from_config(row: RunRow) -> None:
    """Model, optimizer, pruning and variant from the run's config.txt."""
    try:
        run = load_run_config([], row.path / "config.txt")
    except (ConfigError, OSError) as err:
        row.problems.append(f"config.txt unreadable: {str(err).splitlines()[0]}")
        # The seed the id names, so a seed whose config is lost still counts
        # (as failed) under its configuration.
        if m := SEED_SUFFIX.search(row.run_id):
            row.seed = int(m.group(1))
        return
    row.model, row.optimizer, row.seed = run.MODEL, run.OPTIMIZER, run.TRAIN_SEED
    if run.PRUNING_MODE == "single":
        # Kconfig offers a method whenever an optimizer is chosen; "?" marks a
        # config.txt without one rather than passing it off as dense.
        row.pruning = value_or(run.PRUNING_METHOD, "?")
        row.sparsity_target = run.PRUNING_TARGET_SPARSITY
    variants = [registry.family(run.MODEL).variant(run)]
    # The score variant exists only with state pruning (PRUNING_MODE single).
    if run.OPTIMIZER == "adamwprune" and run.ADAMWPRUNE_VARIANT is not None:
        variants.insert(0, run.ADAMWPRUNE_VARIANT)
    row.variant = "+".join(v for v in variants if v != "vanilla") or "vanilla"


def _from_metrics(row: RunRow) -> None:
    path = row.path / "metrics.json"
    if not path.exists():
        row.problems.append("no metrics.json (never reached its first evaluation)")
        return
    try:
        m = json.loads(path.read_text())
    except (OSError, ValueError) as err:  # truncated, or not JSON at all
        _invalid(row, [f"{shown(path)}: not readable as JSON ({err})"])
        return
    problems = problems_of(MetricsRecord, path, m)  # a non-object JSON value is one too
    if problems:
        _invalid(row, problems)
        return
    row.metrics = m
    row.best_loss = _finite(m.get("best_val_loss"))
    row.best_ppl, row.final_ppl = (
        _finite(m.get("best_val_perplexity")),
        _finite(m.get("final_val_perplexity")),
    )
    row.tokens_per_sec = _finite(m.get("tokens_per_sec")) or None
    row.peak_memory_mb = _finite(m.get("peak_memory_mb"))
    row.params, row.wall_time_s = m.get("params"), _finite(m.get("wall_time_s"))
    row.sparsity = _finite(m.get("sparsity"))
    row.tuned = tuned_values(m)
    if row.status == "unknown":
        row.status = m.get("status", "unknown")
    if m.get("error"):
        row.problems.append(str(m["error"]).splitlines()[0][:200])


def _load_eval(row: RunRow) -> dict[str, Any] | None:
    """The run's eval.json when it can be used; else None, with the problem noted."""
    record = load_eval(row.path)
    if record is None:
        return None
    if "error" in record and "sets" not in record:
        row.problems.append(record["error"])
        return None
    problems = problems_of(EvalRecord, row.path / EVAL_FILE, record)
    if problems:
        _invalid(row, problems)
        return None
    return record


def _from_eval(row: RunRow, record: dict[str, Any] | None) -> None:
    for name, entry in (record or {}).get("sets", {}).items():
        if "skipped" not in entry and entry.get("kind", "perplexity") == "perplexity":
            row.evals[name] = float(entry["perplexity"])
            for key, into in (
                ("bits_per_byte", row.bits_per_byte),
                ("word_perplexity", row.word_ppl),
            ):
                if _finite(entry.get(key)) is not None:
                    into[name] = float(entry[key])
    row.scores.update(lm_eval_scores(record or {}))
    if isinstance((record or {}).get("measured"), dict):
        row.measured = dict(record["measured"])  # type: ignore[index]


def read_run(path: Path, status: str = "unknown") -> RunRow:
    row = RunRow(path.name, path, status)
    if not path.is_dir():
        row.problems.append("no run folder")
        return row
    if not (path / "config.txt").exists() and (path / "eval.json").exists():
        return _pretrained(row)  # `make eval-baseline`: evaluated, never trained here
    _from_config(row)
    _from_metrics(row)
    _from_eval(row, _load_eval(row))
    return row


def _pretrained(row: RunRow) -> RunRow:
    row.status, row.optimizer = "pretrained", "-"
    record = _load_eval(row)
    if record is not None:
        model = record.get("model") or {}
        row.model, row.params = model.get("family", "gpt2"), model.get("params")
        _from_eval(row, record)
    return row


def collect(root: Path) -> tuple[list[RunRow], dict[str, Any]]:
    """Rows for a matrix folder (in matrix order, states from matrix.json), for
    any folder of run folders, or for one run folder; plus the matrix record
    ({} for the others)."""
    root = Path(root)
    if (root / MATRIX_FILE).exists():
        try:
            state = MatrixState.load(root, entries=False)  # checked run by run below
        except MatrixError as err:
            raise FileNotFoundError(str(err)) from None
        check_matrix(root / MATRIX_FILE, state.data)  # raises RecordError (a ValueError)
        rows = []
        for run_id, entry in state.runs.items():
            if escapes := run_id_problems(run_id):
                # read nothing there: the row names the id and why it is not a run
                row = RunRow(run_id, root / MATRIX_FILE, entry["state"])
                _invalid(row, [f"{shown(root / MATRIX_FILE)}: {escapes[0]}"])
                rows.append(row)
                continue
            if is_trial(root, root / run_id):
                continue  # a tuning trial, not a run of the comparison
            row = read_run(root / run_id, entry["state"])
            problems = check_matrix_run(root / MATRIX_FILE, run_id, entry)
            if problems:
                _invalid(row, problems)
                rows.append(row)
                continue
            row.overrides = dict(a.partition("=")[::2] for a in entry.get("overrides", []))
            row.reused_from = entry.get("reused_from") or None
            row.tuned = tuned_values(entry) or row.tuned
            error = str(entry.get("error") or "")
            if error and not any(error.startswith(p) or p.startswith(error) for p in row.problems):
                row.problems.append(error)
            rows.append(row)
        return rows, state.data
    if is_run(root):  # one run (results/latest after a plain `make`)
        return [read_run(root)], {}
    runs = sorted(
        p for p in root.iterdir() if is_run(p) and not p.is_symlink() and ".prev-" not in p.name
    )
    return [read_run(p) for p in runs], {}


def tuned_values(record: dict[str, Any]) -> dict[str, float]:
    """The values a tuned run ran at, from its record's "tuned" field (checked by
    record_model.Tuned); {} for an untuned run."""
    tuned = record.get("tuned")
    values = tuned.get("values") if isinstance(tuned, dict) else None
    return {k: float(v) for k, v in values.items()} if isinstance(values, dict) else {}


def is_trial(root: Path, path: Path) -> bool:
    """A tuning trial's run (under <matrix>/tune/): trials are searched over,
    never compared, so no table or figure of the matrix shows them."""
    try:
        return path.resolve().is_relative_to((root / TUNE_DIR).resolve())
    except OSError:
        return False


def is_run(path: Path) -> bool:
    """A run folder: a trained run's config.txt, or `make eval-baseline`'s eval.json."""
    return path.is_dir() and ((path / "config.txt").exists() or (path / "eval.json").exists())


def _no_runs(root: Path) -> FileNotFoundError:
    """What to pass instead of a folder that holds no runs: the folders under it that do."""
    try:
        inside = sorted(
            p.name
            for p in root.iterdir()
            if p.is_dir()
            and not p.is_symlink()
            and ((p / MATRIX_FILE).exists() or any(map(is_run, p.iterdir())))
        )
    except OSError:
        inside = []
    where = (
        f"; the folders under it that do: {', '.join(inside[:6])}"
        f"{' and more' if len(inside) > 6 else ''}"
        if inside
        else ""
    )
    return FileNotFoundError(
        f"{shown(root)} holds no runs (no config.txt, no matrix.json, no run folders){where}. "
        f"Pass RESULTS=<dir>: a run folder, a matrix folder, or a folder of run folders, "
        f"e.g. RESULTS={shown(root / inside[0]) if inside else 'results/<run-id>'}"
    )


def load_rows(
    root: Path, baseline: str | None = None
) -> tuple[list[RunRow], dict[str, Any], dict[str, RunRow]]:
    """A folder's rows with their delta against the baseline applied, its matrix
    record, and the baseline per model: what `make results` and `make report` show.
    The folder is a matrix, any folder of run folders, or one run folder."""
    rows, matrix = collect(root)
    if not rows:
        raise _no_runs(root)
    baselines = pick_baseline(rows, baseline)
    apply_baseline(rows, baselines)
    return rows, matrix, baselines


class UnknownBaseline(ValueError):
    """The baseline named is not among the runs shown."""


_BASELINE_LINE = re.compile(rb'^CONFIG_RESULTS_BASELINE_RUN_ID="([^"\\]*)"[ \t\r]*$', re.MULTILINE)


def configured_baseline(dot_config: Path) -> str | None:
    """.config's RESULTS_BASELINE_RUN_ID, None when empty or unset. Only that line
    is read, as for RESULTS_DIR: `make results` works without a loadable .config."""
    try:
        match = _BASELINE_LINE.search(dot_config.read_bytes())
    except OSError:
        return None
    return match.group(1).decode(errors="replace") if match and match.group(1) else None


def pick_baseline(rows: list[RunRow], name: str | None) -> dict[str, RunRow]:
    """Baseline per model: the run named `name` (or the first finished seed of the
    configuration named `name`) for its own model; for every other model, and without
    a name, the first finished dense AdamW run with vanilla attention (else the first
    finished dense AdamW run). A failed, diverged or unfinished run is never chosen
    by itself: its perplexity is not a result."""
    out: dict[str, RunRow] = {}
    if name:
        named = (
            [r for r in rows if r.run_id == name]
            or [r for r in rows if r.config_key == name and r.status in FINISHED and r.best_ppl]
            or [r for r in rows if r.config_key == name]
        )
        if not named:
            raise UnknownBaseline(
                f"BASELINE={name}: no such run here; runs: {', '.join(r.run_id for r in rows)}"
            )
        out[named[0].model or "?"] = named[0]  # another model's runs are not its seeds
    for pref in (lambda r: r.variant == "vanilla", lambda r: True):
        for r in rows:
            model = r.model or "?"  # the key apply_baseline looks up
            if (
                model not in out
                and r.optimizer == "adamw"
                and r.pruning == "none"
                and pref(r)
                and r.best_ppl is not None
                and r.status in FINISHED
            ):
                out[model] = r
    return out


def _tokens(r: RunRow) -> tuple[Any, Any]:
    """What one token of the run's perplexity is: its tokenizer, on its dataset (a
    BPE learnt from the training text is that text's)."""
    return r.metrics.get("tokenizer"), r.metrics.get("dataset")


def apply_baseline(rows: list[RunRow], baselines: dict[str, RunRow]) -> None:
    """delta %: best perplexity against the baseline's, for runs whose tokens are the
    baseline's; perplexity is per token, so across tokenizers the ratio says nothing
    (best nats/char compares those). A seeded run is compared with the baseline
    configuration's run of its own seed where that one finished (the same
    initialisation and data order, as the seed table pairs them)."""
    same_seed = {
        (r.model or "?", r.seed): r
        for base in baselines.values()
        for r in rows
        if r.config_key == base.config_key and r.seed is not None and r.status in FINISHED
    }
    for r in rows:
        base = same_seed.get((r.model or "?", r.seed)) if r.seed is not None else None
        base = base or baselines.get(r.model or "?")
        if base is None or not base.best_ppl or r.best_ppl is None:
            continue
        if _tokens(r) != _tokens(base):
            r.problems.append(
                "no delta %: its tokens ({}, {}) are not the baseline's ({}, {}); perplexity "
                "is per token, compare best nats/char".format(*_tokens(r), *_tokens(base))
            )
            continue
        r.delta_pct = 100 * (r.best_ppl / base.best_ppl - 1)
