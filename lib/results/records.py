"""Type and shape checks for the records `make results`, `make report` and
`make compare` read: metrics.json, eval.json, and the matrix.json fields they use.

A record can be valid JSON and still wrong (edited by hand, written by another
version): `"status": 5`, `"val_loss": {"iters": "x"}`. Each record is checked
once, as it is loaded, against the shape lib/run/metrics.py, lib/run/eval_record.py
and lib/jobs/state.py write; every problem is one line that names the file
and the field, e.g. "results/x/metrics.json: val_loss.iters must be a list of
integers, got 'x'". Every record has a status, an ended run's (completed,
stopped, diverged) its iterations and best_val_loss, and a completed run's its
validation curve (val_loss) too; other absent fields are fine (a run that failed
early records only its status and error); present ones must have their type.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lib.plural import counted

# What lib/run/metrics.py and scripts/train.py write; "starting" is what
# lib/observe/progress.py shows before the first record.
STATUSES = ("starting", "running", "completed", "stopped", "diverged", "failed")
EVAL_KINDS = ("perplexity", "last_word")

Check = tuple[str, Callable[[Any], bool]]  # (what the field must be, test)


class RecordError(ValueError):
    """A record (or a field of one) of the wrong type or shape."""


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _is_count(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _optional(check: Check) -> Check:
    return f"{check[0]} or null", lambda v: v is None or check[1](v)


NUMBER: Check = ("a number", _is_number)  # NaN allowed: a diverging run records it
FINITE: Check = ("a finite number", lambda v: _is_number(v) and math.isfinite(v))
AMOUNT: Check = ("a finite number >= 0", lambda v: FINITE[1](v) and v >= 0)
FRACTION: Check = ("a finite number from 0 to 1", lambda v: FINITE[1](v) and 0 <= v <= 1)
COUNT: Check = ("an integer >= 0", _is_count)
TEXT: Check = ("a string", lambda v: isinstance(v, str))
STATUS: Check = ("one of " + ", ".join(STATUSES), lambda v: isinstance(v, str) and v in STATUSES)

# The metrics.json fields the results read, and their series (below).
METRICS: dict[str, Check] = {
    "status": STATUS,
    "best_val_loss": _optional(FINITE),  # lib/run/metrics.py writes null until a finite best
    "best_val_perplexity": _optional(FINITE),
    "final_val_loss": _optional(NUMBER),  # the last evaluation's, NaN when it diverged
    "final_val_perplexity": _optional(NUMBER),
    "best_val_loss_per_char": _optional(FINITE),  # nats per character (lib/data/valchars.py)
    "tokens_per_sec": _optional(AMOUNT),
    "peak_memory_mb": _optional(AMOUNT),
    "wall_time_s": _optional(AMOUNT),
    "params": _optional(COUNT),
    "iterations": _optional(COUNT),
    "sparsity": _optional(FRACTION),
    "reason": _optional(TEXT),
    "error": _optional(TEXT),
}
SERIES = ("train_loss", "val_loss", "val_loss_per_char", "lr")  # and every "<name>_series"
# Every record has a status; a run that ended through lib/run/metrics.py's summary
# (completed, stopped, diverged) records these too, null where it has no value.
REQUIRED = ("status",)
_ENDED = ("iterations", "best_val_loss")
# A completed run's curve is what the figures and the seeds' bands draw: without it
# the run would be listed completed and silently left out of them.
REQUIRED_AT_END: dict[str, tuple[str, ...]] = {
    "completed": (*_ENDED, "val_loss"),
    "stopped": _ENDED,
    "diverged": _ENDED,
}


def shown(path: Path) -> str:
    """A path as the user typed it: relative to the working folder when inside it."""
    path = Path(path)
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def got(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _field(path: Path, name: str, must: str, value: Any) -> str:
    return f"{shown(path)}: {name} must be {must}, got {got(value)}"


def _fields(
    path: Path, record: dict[str, Any], checks: dict[str, Check], prefix: str = ""
) -> list[str]:
    return [
        _field(path, prefix + name, must, record[name])
        for name, (must, ok) in checks.items()
        if name in record and not ok(record[name])
    ]


def _series(path: Path, name: str, value: Any) -> list[str]:
    """{"iters": [int...], "values": [number...]} of equal lengths."""
    if not isinstance(value, dict):
        return [_field(path, name, "an object with 'iters' and 'values' lists", value)]
    problems = []
    for key, (each, ok) in (("iters", COUNT), ("values", NUMBER)):
        items = value.get(key)
        plural = each.replace("an integer", "integers").replace("a number", "numbers")
        if not isinstance(items, list):
            problems.append(_field(path, f"{name}.{key}", f"a list of {plural}", items))
            continue
        bad = next((i for i, v in enumerate(items) if not ok(v)), None)
        if bad is not None:
            problems.append(_field(path, f"{name}.{key}[{bad}]", each, items[bad]))
    if not problems and len(value["iters"]) != len(value["values"]):
        problems.append(
            f"{shown(path)}: {name}.iters and {name}.values must have equal "
            f"lengths, got {len(value['iters'])} and {len(value['values'])}"
        )
    return problems


def check_metrics(path: Path, m: Any) -> list[str]:
    """Problems of a parsed metrics.json (empty when it can be used)."""
    if not isinstance(m, dict):
        return [f"{shown(path)}: must be a JSON object, got {type(m).__name__}"]
    required = [*REQUIRED, *REQUIRED_AT_END.get(str(m.get("status")), ())]
    problems = [f"{shown(path)}: {name} is missing" for name in required if name not in m]
    problems += _fields(path, m, METRICS)
    for name in [*SERIES, *(k for k in m if k.endswith("_series"))]:
        if name in m:
            problems += _series(path, name, m[name])
    monitor = m.get("monitor")
    if monitor is not None and not isinstance(monitor, dict):
        problems.append(_field(path, "monitor", "an object or null", monitor))
    elif monitor:  # the columns tables.py shows: <reading>_mean and <reading>_max
        problems += _fields(
            path,
            monitor,
            {k: _optional(NUMBER) for k in monitor if k.endswith(("_mean", "_max"))},
            "monitor.",
        )
    return problems + check_tuned(path, m)


def check_eval(path: Path, record: dict[str, Any]) -> list[str]:
    """Problems of an eval.json that lib/eval/record.load_eval accepted (an
    object of format 1 with a "sets" object): each set and the model."""
    problems = []
    for name, entry in record["sets"].items():
        field = f"sets.{name}"
        if not isinstance(entry, dict):
            problems.append(_field(path, field, "an object", entry))
        elif "skipped" in entry:
            problems += _fields(path, entry, {"skipped": TEXT}, field + ".")
        else:
            problems += _fields(
                path,
                entry,
                {
                    "kind": ("one of " + ", ".join(EVAL_KINDS), lambda v: v in EVAL_KINDS),
                    "perplexity": FINITE,
                    "accuracy": FRACTION,
                    "bits_per_byte": AMOUNT,
                    "word_perplexity": FINITE,
                },
                field + ".",
            )
            if "perplexity" not in entry:
                problems.append(f"{shown(path)}: {field}.perplexity is missing")
    model = record.get("model")
    if model is not None and not isinstance(model, dict):
        problems.append(_field(path, "model", "an object", model))
    elif model:
        problems += _fields(path, model, {"family": TEXT, "params": _optional(COUNT)}, "model.")
    measured = record.get("measured")
    if measured is not None and not isinstance(measured, dict):
        problems.append(_field(path, "measured", "an object", measured))
    elif measured:  # lib/eval/throughput.py
        problems += _fields(
            path,
            measured,
            {
                "tokens_per_sec": _optional(AMOUNT),
                "peak_memory_mb": _optional(AMOUNT),
                "machine": TEXT,
            },
            "measured.",
        )
    return problems


def _is_override(v: Any) -> bool:
    return isinstance(v, str) and "=" in v


def check_matrix_run(path: Path, run_id: str, entry: dict[str, Any]) -> list[str]:
    """Problems of one run's entry in matrix.json (its state is checked by
    MatrixState.load): its overrides and its recorded error."""
    field = f"runs.{run_id}."
    problems = _fields(path, entry, {"error": _optional(TEXT)}, field)
    problems += check_tuned(path, entry, field)
    args = entry.get("overrides", [])
    if not isinstance(args, list):
        problems.append(_field(path, field + "overrides", "a list of 'SYMBOL=value' strings", args))
    else:
        bad = next((i for i, a in enumerate(args) if not _is_override(a)), None)
        if bad is not None:
            problems.append(
                _field(path, f"{field}overrides[{bad}]", "a 'SYMBOL=value' string", args[bad])
            )
    return problems


def check_tuned(path: Path, record: dict[str, Any], prefix: str = "") -> list[str]:
    """A tuned run's "tuned" field (absent on an untuned run): the values its
    configuration's study found, {"values": {"LEARNING_RATE": 0.003}, "tuning": "..."}."""
    tuned = record.get("tuned")
    if tuned is None:
        return []
    if not isinstance(tuned, dict):
        return [_field(path, prefix + "tuned", "an object or null", tuned)]
    return _fields(path, tuned, {"values": PARAMS, "tuning": _optional(TEXT)}, prefix + "tuned.")


def _strings(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(s, str) for s in v)


def check_matrix(path: Path, data: dict[str, Any]) -> None:
    """The matrix-wide fields the summary reads; raises RecordError naming the
    first wrong one, since no table of that matrix can be trusted without them."""
    problems = _fields(
        path,
        data,
        {
            "matrix_id": TEXT,
            "overrides": (
                "an object of strings",
                lambda v: isinstance(v, dict) and all(isinstance(x, str) for x in v.values()),
            ),
            "sweep": _optional(("an object", lambda v: isinstance(v, dict))),
        },
    )
    if not problems and data.get("sweep"):
        problems = _fields(
            path,
            data["sweep"],
            {"params": ("a list of strings", _strings), "log": ("a list of strings", _strings)},
            "sweep.",
        )
        if "params" not in data["sweep"]:
            problems.append(f"{shown(path)}: sweep.params is missing")
    if problems:
        raise RecordError(problems[0] + "; fix or restore the file, then run this again")


def reason(problems: list[str]) -> str:
    """One line for a row's status: the first problem, and how many more."""
    more = len(problems) - 1
    return problems[0] + (f" (and {counted(more, 'more problem')})" if more else "")


# tune/<config>/tuning.json (the matrix's tuning stage writes it after every trial).
TRIAL_STATES = ("complete", "pruned", "fail", "running")
BOOL: Check = ("true or false", lambda v: isinstance(v, bool))
PARAMS: Check = (
    "an object of numbers",
    lambda v: isinstance(v, dict) and all(_is_number(x) for x in v.values()),
)
TUNING: dict[str, Check] = {
    "config": TEXT,
    "storage": _optional(TEXT),
    "study": _optional(TEXT),
    "symbols": ("a list of objects", lambda v: isinstance(v, list)),
    "budget": ("an object", lambda v: isinstance(v, dict)),
    "trials": ("a list of objects", lambda v: isinstance(v, list)),
    "best": _optional(("an object", lambda v: isinstance(v, dict))),
}
TUNING_SYMBOL: dict[str, Check] = {
    "name": TEXT,
    "low": FINITE,
    "high": FINITE,
    "log": BOOL,
    "best": _optional(FINITE),
    "at_edge": _optional(BOOL),
}
TUNING_BUDGET: dict[str, Check] = {
    "trials": COUNT,
    "steps_per_trial": COUNT,
    "fraction_of_max_iters": _optional(FRACTION),
    "sampler": TEXT,
    "pruner": TEXT,
    "seed": _optional(COUNT),
}
TUNING_TRIAL: dict[str, Check] = {
    "number": COUNT,
    "value": _optional(NUMBER),
    "params": PARAMS,
    "steps": _optional(COUNT),
    "run_dir": _optional(TEXT),
    "state": ("one of " + ", ".join(TRIAL_STATES), lambda v: v in TRIAL_STATES),
}
TUNING_BEST: dict[str, Check] = {
    "value": _optional(FINITE),
    "params": PARAMS,
    "trial": _optional(COUNT),
}


def _missing(path: Path, record: dict[str, Any], names: list[str], prefix: str = "") -> list[str]:
    return [f"{shown(path)}: {prefix}{n} is missing" for n in names if n not in record]


def _entries(
    path: Path, items: list[Any], name: str, checks: dict[str, Check], required: list[str]
) -> list[str]:
    """Each item of a list of objects against checks, its required fields present."""
    problems = []
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            problems.append(_field(path, f"{name}[{i}]", "an object", item))
            continue
        problems += _missing(path, item, required, f"{name}[{i}].")
        problems += _fields(path, item, checks, f"{name}[{i}].")
    return problems


def check_tuning(path: Path, record: Any) -> list[str]:
    """Problems of a parsed tuning.json (empty when it can be used): the fields
    the tuning tables and curve read, with their types, and a search range whose
    low end is below its high end."""
    if not isinstance(record, dict):
        return [f"{shown(path)}: must be a JSON object, got {type(record).__name__}"]
    problems = _missing(path, record, ["config", "symbols", "budget", "trials"])
    problems += _fields(path, record, TUNING)
    if problems:
        return problems
    symbols = _entries(path, record["symbols"], "symbols", TUNING_SYMBOL, ["name", "low", "high"])
    problems += symbols
    if not symbols:
        problems += [
            _field(path, f"symbols[{i}].high", f"above low ({s['low']!r})", s["high"])
            for i, s in enumerate(record["symbols"])
            if s["high"] <= s["low"]
        ]
        problems += [
            _field(path, f"symbols[{i}].low", "above 0 on a log range", s["low"])
            for i, s in enumerate(record["symbols"])
            if s.get("log") and s["low"] <= 0
        ]
    problems += _missing(path, record["budget"], ["trials", "steps_per_trial"], "budget.")
    problems += _fields(path, record["budget"], TUNING_BUDGET, "budget.")
    problems += _entries(path, record["trials"], "trials", TUNING_TRIAL, ["number", "state"])
    if record.get("best"):
        problems += _fields(path, record["best"], TUNING_BEST, "best.")
    return problems
