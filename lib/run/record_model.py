"""The shapes of a run folder's records, stated once as pydantic models: metrics.json
(MetricsRecord), eval.json (EvalRecord), a tuning study's tuning.json (TuningRecord),
and the matrix.json fields `make results` reads (MatrixFields, MatrixRun).

The writers (lib/run/metrics.py, lib/run/eval_record.py, lib/tune/record.py) check a
record against its model before the atomic write, so a wrong field stops the write
that made it; the readers (lib/results/collect.py, lib/results/tuning.py) check each
record as they load it, since a file may still be edited by hand or written by
another version. A record is used as the JSON it is (a dict): the model validates,
it does not convert (strict types: "5" is no number, true no integer).

Fields the models do not name are kept and not checked (extra="allow"): a record
written by an older version with fields since dropped, or by a newer part of the
run, still loads; the named fields are the ones the tables, figures and tools read.
Two families of fields are named by pattern: every "<name>_series" of metrics.json
is a Series, and its monitor's "<reading>_mean" and "<reading>_max" are numbers
or null.

Every problem is one line naming the file and the field, e.g.
"results/x/metrics.json: val_loss.iters must be a list of integers >= 0, got 'x'";
problems_of() lists them, check() raises RecordError with the first.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    ValidatorFunctionWrapHandler,
    WrapValidator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from lib.plural import counted

# What lib/run/metrics.py and scripts/train.py write; "starting" is what
# lib/observe/progress.py shows before the first record.
STATUSES = ("starting", "running", "completed", "stopped", "diverged", "failed")
EVAL_KINDS = ("perplexity", "last_word")
TRIAL_STATES = ("complete", "pruned", "fail", "running")


class RecordError(ValueError):
    """A record (or a field of one) of the wrong type or shape."""


def shown(path: Path | str) -> str:
    """A path as the user typed it: relative to the working folder when inside it."""
    path = Path(path)
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def got(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _must(phrase: str) -> WrapValidator:
    """A value's own type or range error (not one inside it) as "must be <phrase>"."""

    def wrap(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        try:
            return handler(value)
        except ValidationError as err:
            if any(e["loc"] == () and not e["type"].startswith("record_") for e in err.errors()):
                raise PydanticCustomError(
                    "record_must", "must be {must}", {"must": phrase}
                ) from None
            raise

    return WrapValidator(wrap)


def _list_of(phrase: str, item: str) -> WrapValidator:
    """_must for a long list of scalars (a curve): the first bad item as "[i] must be
    <item>", checked without a Python call per item."""

    def wrap(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        try:
            return handler(value)
        except ValidationError as err:
            first = err.errors()[0]["loc"]
            if not first:
                raise PydanticCustomError(
                    "record_must", "must be {must}", {"must": phrase}
                ) from None
            index = int(first[0])
            raise PydanticCustomError(
                "record_must",
                "must be {must}",
                {"field": index, "must": item, "value": value[index]},
            ) from None

    return WrapValidator(wrap)


# JSON's types, strict: an int is a number, a bool is neither a number nor an integer.
Number = Annotated[float, _must("a number")]  # NaN allowed: a diverging run records it
OptNumber = Annotated[float | None, _must("a number or null")]
OptFinite = Annotated[
    Annotated[float, Field(allow_inf_nan=False)] | None, _must("a finite number or null")
]
Finite = Annotated[float, Field(allow_inf_nan=False), _must("a finite number")]
Amount = Annotated[float, Field(ge=0, allow_inf_nan=False), _must("a finite number >= 0")]
OptAmount = Annotated[
    Annotated[float, Field(ge=0, allow_inf_nan=False)] | None,
    _must("a finite number >= 0 or null"),
]
OptFraction = Annotated[
    Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)] | None,
    _must("a finite number from 0 to 1 or null"),
]
Fraction = Annotated[
    float, Field(ge=0, le=1, allow_inf_nan=False), _must("a finite number from 0 to 1")
]
Count = Annotated[int, Field(ge=0), _must("an integer >= 0")]
OptCount = Annotated[Annotated[int, Field(ge=0)] | None, _must("an integer >= 0 or null")]
Text = Annotated[str, _must("a string")]
OptText = Annotated[str | None, _must("a string or null")]
Bool = Annotated[bool, _must("true or false")]
OptBool = Annotated[bool | None, _must("true or false or null")]
Params = Annotated[dict[str, Number], _must("an object of numbers")]
Object = Annotated[dict[str, Any], _must("an object")]
OptObject = Annotated[dict[str, Any] | None, _must("an object or null")]
Strings = Annotated[list[Text], _must("a list of strings")]


# The default of a field that may be absent but, when present, is never null (a
# curve, a set's perplexity): typed Any so that the field keeps its own type.
ABSENT: Any = None


class Record(BaseModel):
    """A JSON object of a record: strict types; fields it does not name are kept."""

    model_config = ConfigDict(strict=True, extra="allow")


def _present(record: Record, names: tuple[str, ...]) -> None:
    """Raise when one of names is absent (null is a value: present)."""
    if absent := [n for n in names if n not in record.model_fields_set]:
        raise PydanticCustomError("record_missing", "{fields} missing", {"fields": absent})


class Series(Record):
    """A curve: {"iters": [step, ...], "values": [value, ...]}, one value per step."""

    iters: Annotated[
        list[Annotated[int, Field(ge=0)]], _list_of("a list of integers >= 0", "an integer >= 0")
    ]
    values: Annotated[list[float], _list_of("a list of numbers", "a number")]

    @model_validator(mode="after")
    def _equal_lengths(self) -> Series:
        if len(self.iters) != len(self.values):
            raise PydanticCustomError(
                "record_lengths",
                "iters and values must have equal lengths",
                {"iters": len(self.iters), "values": len(self.values)},
            )
        return self


SeriesField = Annotated[Series, _must("an object with 'iters' and 'values' lists")]


class Tuned(Record):
    """A tuned run's "tuned" (metrics.json, matrix.json's run entry): the values its
    configuration's study found, {"values": {"LEARNING_RATE": 0.003}, "tuning": ...}."""

    values: Params = Field(default_factory=dict)
    tuning: OptText = None


OptTuned = Annotated[Tuned | None, _must("an object or null")]

# A completed run's curve is what the figures and the seeds' bands draw: without it
# the run would be listed completed and silently left out of them. A run that ended
# through lib/run/metrics.py's summary (completed, stopped, diverged) records its
# iterations and best_val_loss, null where it has no value.
_ENDED = ("iterations", "best_val_loss")
REQUIRED_AT_END: dict[str, tuple[str, ...]] = {
    "completed": (*_ENDED, "val_loss"),
    "stopped": _ENDED,
    "diverged": _ENDED,
}


class MetricsRecord(Record):
    """metrics.json: lib/run/metrics.py's summary (the run's figures and curves) over
    lib/run/record.py's static record (what ran, on what) and each part's section.
    Every record has a status; a run that failed early may hold only it and its error;
    an ended one what REQUIRED_AT_END names. Absent fields are fine; present ones
    have their type."""

    status: Annotated[
        Literal["starting", "running", "completed", "stopped", "diverged", "failed"],
        _must("one of " + ", ".join(STATUSES)),
    ]
    # The summary's figures (lib/run/metrics.py); null until there is a value.
    iterations: OptCount = None
    best_val_loss: OptFinite = None
    best_val_perplexity: OptFinite = None
    final_val_loss: OptNumber = None  # the last evaluation's, NaN when it diverged
    final_val_perplexity: OptNumber = None
    best_val_loss_per_char: OptFinite = None  # nats per character (lib/data/valchars.py)
    final_val_loss_per_char: OptNumber = None
    tokens_per_sec: OptAmount = None
    ms_per_iter: OptAmount = None
    page_faults_per_iter: OptAmount = None  # minor page faults, over the timed steps
    system_ms_per_iter: OptAmount = None  # the kernel's time, over the timed steps
    tokens_seen: OptCount = None
    wall_time_s: OptAmount = None
    peak_memory_mb: OptAmount = None  # lib/run/record.py's end_figures
    mfu: OptAmount = None
    params: OptCount = None
    sparsity: OptFraction = None  # lib/train/records.py's optimizer_summary
    reason: OptText = None
    error: OptText = None  # a failed run's one paragraph
    failed_at_step: OptCount = None  # lib/run/full_disk.py: the step a full disk stopped
    # What ran (lib/run/record.py's static_record); the results read some of them.
    run_id: OptText = None
    model: OptText = None
    optimizer: OptText = None
    # {"hash", ...} (lib/run/fingerprint.py, read by lib/jobs/reuse.py); older runs: the hash
    fingerprint: Annotated[str | dict[str, Any] | None, _must("a string, an object or null")] = None
    max_iters: OptCount = None
    world_size: OptCount = None
    data_notices: Annotated[list[Text] | None, _must("a list of strings or null")] = None
    overrides: Annotated[dict[str, Text] | None, _must("an object of strings or null")] = None
    dataset: OptText = None
    tokenizer: OptText = None
    device: OptText = None
    device_name: OptText = None
    effective_batch_size: OptCount = None
    tokens_per_iter: OptCount = None
    gradient_checkpointing: OptBool = None
    epochs: OptAmount = None
    # The parts' sections (lib/train/build.py, lib/train/records.py, the trainer's end).
    # Sections whose shape is their part's own (model_config, init, speed, kernels,
    # lr_schedule, batch_plan, trackers, spam_*) are kept unchecked, like every field
    # not named here; "model_config" could not be named anyway (pydantic's own).
    params_non_embedding: OptCount = None
    optimizer_impl: OptText = None
    dtype: OptText = None
    dtype_reason: OptText = None
    checkpoints: OptObject = None  # {"save": bool, ...}: lib/run/full_disk.py reads it
    micro_batch_size: OptCount = None
    gradient_accumulation: OptCount = None
    memory_estimate_mb: OptAmount = None
    val_chars: OptCount = None
    val_tokens_per_char: OptAmount = None
    compiled: OptBool = None
    compile_error: OptText = None
    optimizer_state_bytes: OptCount = None
    optimizer_state_breakdown: Annotated[
        dict[str, Count] | None, _must("an object of integers >= 0 or null")
    ] = None
    pruning_method: OptText = None
    sparsity_target: OptFraction = None
    sparsity_per_layer: OptObject = None
    load_average: OptAmount = None  # a CPU run's, beside its speed (lib/run/record.py)
    cpu_count: OptCount = None
    peak_memory_measure: OptText = None
    stopped_early: OptBool = None
    stop_signal: OptText = None  # the signal that stopped the run (lib/jobs/runner.py)
    inference: OptObject = None  # lib/jobs/outputs.py
    environment: OptObject = None  # lib/run/environment.py
    monitor: OptObject = None  # lib/observe/monitor: "<reading>_mean"/"_max" (below)
    tuned: OptTuned = None
    events: Annotated[list[Object], _must("a list of objects")] = Field(default_factory=list)
    # The curves; every "<name>_series" (LogField.series) is one too. Never null.
    train_loss: SeriesField = ABSENT
    val_loss: SeriesField = ABSENT
    val_loss_per_char: SeriesField = ABSENT
    lr: SeriesField = ABSENT

    @model_validator(mode="after")
    def _ended(self) -> MetricsRecord:
        _present(self, REQUIRED_AT_END.get(self.status, ()))
        return self


class EvalSet(Record):
    """One set of eval.json: {"skipped": why}, or a perplexity or last-word entry
    (lib/run/eval_record.py's docstring has every field)."""

    skipped: Text = ABSENT
    kind: Annotated[
        Literal["perplexity", "last_word"], _must("one of " + ", ".join(EVAL_KINDS))
    ] = "perplexity"
    perplexity: Finite = ABSENT
    accuracy: Fraction = ABSENT
    bits_per_byte: OptAmount = None  # whole texts only; null: not measured
    word_perplexity: OptFinite = None

    @model_validator(mode="after")
    def _scored(self) -> EvalSet:
        if "skipped" not in self.model_fields_set:
            _present(self, ("perplexity",))
        return self


class EvalModel(Record):
    family: Text = ABSENT
    params: OptCount = None


class Measured(Record):
    """lib/eval/throughput.py: the cost over the perplexity sets."""

    tokens_per_sec: OptAmount = None
    peak_memory_mb: OptAmount = None
    machine: Text = ABSENT


class EvalRecord(Record):
    """eval.json, format 1 (lib/run/eval_record.py)."""

    format: Annotated[Literal[1], _must("1")]
    created: OptText = None
    run_id: OptText = None
    model: Annotated[EvalModel | None, _must("an object")] = None
    measured: Annotated[Measured | None, _must("an object")] = None
    sets: Annotated[dict[str, Annotated[EvalSet, _must("an object")]], _must("an object")]
    lm_eval: OptObject = None  # lib/eval/downstream.py's section


class TuningSymbol(Record):
    name: Text
    low: Finite
    high: Finite
    log: Bool = False
    best: OptFinite = None
    at_edge: OptBool = None

    @model_validator(mode="after")
    def _range(self) -> TuningSymbol:
        if self.high <= self.low:
            raise _at("high", f"above low ({self.low!r})", self.high)
        if self.log and self.low <= 0:
            raise _at("low", "above 0 on a log range", self.low)
        return self


def _at(field: str, must: str, value: Any) -> PydanticCustomError:
    """A problem of one field found by its record's check (a range's ends)."""
    return PydanticCustomError(
        "record_must", "must be {must}", {"field": field, "must": must, "value": value}
    )


class TuningBudget(Record):
    trials: Count
    steps_per_trial: Count
    fraction_of_max_iters: OptFraction = None
    sampler: Text = ABSENT
    pruner: Text = ABSENT
    seed: OptCount = None
    metric: OptText = None


class TuningTrial(Record):
    number: Count
    state: Annotated[
        Literal["complete", "pruned", "fail", "running"],
        _must("one of " + ", ".join(TRIAL_STATES)),
    ]
    value: OptNumber = None
    params: Params = Field(default_factory=dict)
    steps: OptCount = None
    run_dir: OptText = None


class TuningBest(Record):
    value: OptFinite = None
    params: Params = Field(default_factory=dict)
    trial: OptCount = None


class TuningRecord(Record):
    """<matrix>/tune/<config>/tuning.json (lib/tune/record.py)."""

    config: Text
    storage: OptText = None
    study: OptText = None
    symbols: Annotated[
        list[Annotated[TuningSymbol, _must("an object")]], _must("a list of objects")
    ]
    budget: Annotated[TuningBudget, _must("an object")]
    trials: Annotated[list[Annotated[TuningTrial, _must("an object")]], _must("a list of objects")]
    best: Annotated[TuningBest | None, _must("an object or null")] = None


def _override(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    value = handler(value)
    if "=" not in value:
        raise PydanticCustomError(
            "record_must", "must be {must}", {"must": "a 'SYMBOL=value' string"}
        )
    return value


class MatrixRun(Record):
    """One run's entry of matrix.json (its state is checked by lib/jobs/state.py's
    MatrixState.load, which resumes no matrix with an entry wrong here)."""

    overrides: Annotated[
        list[Annotated[str, _must("a 'SYMBOL=value' string"), WrapValidator(_override)]],
        _must("a list of 'SYMBOL=value' strings"),
    ] = Field(default_factory=list)
    error: OptText = None
    tuned: OptTuned = None
    attempts: Count = 0


class Sweep(Record):
    params: Strings
    log: Strings = Field(default_factory=list)


class MatrixFields(Record):
    """The matrix-wide fields of matrix.json the summary reads."""

    matrix_id: Text = ABSENT
    overrides: Annotated[dict[str, Text], _must("an object of strings")] = Field(
        default_factory=dict
    )
    sweep: Annotated[Sweep | None, _must("an object or null")] = None


# Fields named by pattern (see the module's docstring): (the record's field holding
# them, or "" for the record itself; which names; their type).
_PATTERNS: dict[type[Record], list[tuple[str, Callable[[str], bool], TypeAdapter[Any]]]] = {
    MetricsRecord: [
        ("", lambda k: k.endswith("_series"), TypeAdapter(SeriesField)),
        ("monitor", lambda k: k.endswith(("_mean", "_max")), TypeAdapter(OptNumber)),
    ],
}


def _name(loc: tuple[int | str, ...]) -> str:
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else f"{'.' if text else ''}{part}"
    return text


def _lines(path: Path, err: ValidationError, where: tuple[int | str, ...] = ()) -> list[str]:
    """Each error as one line naming the file and the field; of a list, its first bad item."""
    out: list[str] = []
    lists: set[tuple[int | str, ...]] = set()
    for e in err.errors(include_url=False):
        loc = where + tuple(e["loc"])
        if loc and isinstance(loc[-1], int):
            if loc[:-1] in lists:
                continue
            lists.add(loc[:-1])
        ctx = e.get("ctx") or {}
        at = f"{shown(path)}: "
        if e["type"] == "record_missing":
            out += [f"{at}{_name((*loc, f))} is missing" for f in ctx["fields"]]
        elif e["type"] == "record_lengths":
            name = _name(loc)
            out.append(
                f"{at}{name}.iters and {name}.values must have equal lengths, "
                f"got {ctx['iters']} and {ctx['values']}"
            )
        elif e["type"] == "record_must":
            field = (*loc, ctx["field"]) if "field" in ctx else loc
            value = ctx["value"] if "field" in ctx else e["input"]
            out.append(f"{at}{_name(field)} must be {ctx['must']}, got {got(value)}")
        elif e["type"] == "missing":
            out.append(f"{at}{_name(loc)} is missing")
        else:  # a check without its own phrase: pydantic's message
            out.append(f"{at}{_name(loc)}: {e['msg']}")
    return out


def problems_of(model: type[Record], path: Path, data: Any) -> list[str]:
    """The problems of a parsed record (empty when it can be used), one line each."""
    if not isinstance(data, dict):
        return [f"{shown(path)}: must be a JSON object, got {type(data).__name__}"]
    try:
        model.model_validate(data)
        out = []
    except ValidationError as err:
        out = _lines(path, err)
    for field, named, adapter in _PATTERNS.get(model, []):
        holder = data.get(field) if field else data
        if not isinstance(holder, dict):
            continue
        for key, value in holder.items():
            if named(key):
                try:
                    adapter.validate_python(value, strict=True)
                except ValidationError as err:
                    out += _lines(path, err, (field, key) if field else (key,))
    return out


def check(model: type[Record], path: Path, data: Any) -> None:
    """Raise RecordError with the first problem of data (a writer's record before it
    is written): one paragraph naming the file and the field."""
    if found := problems_of(model, path, data):
        raise RecordError(reason(found))


def reason(found: list[str]) -> str:
    """One line for a row's status: the first problem, and how many more."""
    more = len(found) - 1
    return found[0] + (f" (and {counted(more, 'more problem')})" if more else "")


def check_matrix(path: Path, data: dict[str, Any]) -> None:
    """matrix.json's matrix-wide fields; raises RecordError naming the first wrong
    one, since no table of that matrix can be trusted without them."""
    if found := problems_of(MatrixFields, path, data):
        raise RecordError(found[0] + "; fix or restore the file, then run this again")


def check_matrix_run(path: Path, run_id: str, entry: dict[str, Any]) -> list[str]:
    """Problems of one run's entry in matrix.json, named runs.<id>.<field>."""
    try:
        MatrixRun.model_validate(entry)
    except ValidationError as err:
        return _lines(path, err, ("runs", run_id))
    return []
