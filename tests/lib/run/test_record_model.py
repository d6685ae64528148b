"""The record models (lib/run/record_model.py): a wrong-typed field is refused with the
file and the field named, by the reader and by the writer before anything is written;
an older record, with fields since dropped, still loads; a real run's record validates."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from lib.run import eval_record
from lib.run.metrics import RunMetrics
from lib.run.record_model import (
    EvalRecord,
    MetricsRecord,
    RecordError,
    TuningRecord,
    problems_of,
)
from lib.tune import record as tune_record

ASSETS = Path(__file__).resolve().parents[2] / "assets"
CURVE = {"iters": [10, 20], "values": [4.5, 4.0]}
ENDED = {"status": "completed", "iterations": 20, "best_val_loss": 4.0, "val_loss": CURVE}
TUNING = {
    "config": "gpt2_adamw_none",
    "storage": "sqlite:///study.db",
    "study": "gpt2_adamw_none",
    "symbols": [{"name": "LEARNING_RATE", "low": 1e-4, "high": 1e-2, "log": True}],
    "budget": {"trials": 2, "steps_per_trial": 10, "sampler": "tpe", "pruner": "none"},
    "trials": [{"number": 0, "state": "complete", "value": 4.2, "params": {"LEARNING_RATE": 1e-3}}],
    "best": {"value": 4.2, "params": {"LEARNING_RATE": 1e-3}, "trial": 0},
}


@pytest.mark.parametrize(
    "model, record, problem",
    [
        (MetricsRecord, {**ENDED, "iterations": "20"}, "iterations must be an integer >= 0 or null, got '20'"),
        (MetricsRecord, {**ENDED, "iterations": True}, "iterations must be an integer >= 0 or null, got True"),
        (MetricsRecord, {**ENDED, "tokens_per_sec": -1.0}, "tokens_per_sec must be a finite number >= 0 or null, got -1.0"),
        (MetricsRecord, {**ENDED, "failed_at_step": 2.5}, "failed_at_step must be an integer >= 0 or null, got 2.5"),
        (MetricsRecord, {**ENDED, "lr": {"iters": [1], "values": [None]}}, "lr.values[0] must be a number, got None"),
        (MetricsRecord, {**ENDED, "val_loss": None}, "val_loss must be an object with 'iters' and 'values' lists, got None"),
        (MetricsRecord, {**ENDED, "tuned": {"values": {"LEARNING_RATE": "high"}}}, "tuned.values.LEARNING_RATE must be a number, got 'high'"),
        (MetricsRecord, {**ENDED, "monitor": {"gpu_util_mean": "x"}}, "monitor.gpu_util_mean must be a number or null, got 'x'"),
        (EvalRecord, {"format": 1, "sets": {"val": {"perplexity": "12"}}}, "sets.val.perplexity must be a finite number, got '12'"),
        (EvalRecord, {"format": 1, "sets": {"val": {"kind": "perplexity"}}}, "sets.val.perplexity is missing"),
        (TuningRecord, {**TUNING, "budget": {**TUNING["budget"], "trials": 2.0}}, "budget.trials must be an integer >= 0, got 2.0"),
        (TuningRecord, {**TUNING, "trials": [{"number": 0, "state": "done"}]}, "trials[0].state must be one of complete, pruned, fail, running, got 'done'"),
    ],
)  # fmt: skip
def test_a_wrong_typed_field_is_refused_naming_the_file_and_field(tmp_path, model, record, problem):
    path = tmp_path / "record.json"
    assert problems_of(model, path, record) == [f"{path}: {problem}"]


def test_the_writers_refuse_a_wrong_field_before_writing(tmp_path):
    metrics = RunMetrics(tmp_path / "metrics.json", {"tokens_per_iter": 8})
    summary = metrics.summary("running", 0, 0, {"params": "many"})
    with pytest.raises(
        RecordError, match=r"metrics.json: params must be an integer >= 0 or null, got 'many'$"
    ):
        metrics.write(summary)
    good = metrics.summary("running", 0, 0, {"params": 10})
    metrics.write(good)
    assert problems_of(MetricsRecord, metrics.path, json.loads(metrics.path.read_text())) == []
    with pytest.raises(
        RecordError, match=r"eval.json: sets.val.perplexity must be a finite number, got nan"
    ):
        eval_record.write_eval(tmp_path, {"sets": {"val": {"perplexity": math.nan}}})
    with pytest.raises(RecordError, match=r"tuning.json: symbols\[0\].high must be above low"):
        tune_record.write(
            tmp_path / "tuning.json", {**TUNING, "symbols": [{"name": "X", "low": 2, "high": 1}]}
        )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["metrics.json"]  # nothing else written
    assert metrics.path.read_bytes().endswith(b" " * 100 + b"\n")  # the full-disk reserve stays


def test_an_old_record_with_fields_since_dropped_still_loads(tmp_path):
    """A real HAMT run's record from an earlier version, fields since renamed or dropped
    added besides (extra="allow"), and a full disk's failure note (lib/run/full_disk.py)."""
    old = json.loads((ASSETS / "hamt_slots_metrics.json").read_text())
    old |= {"mfu_pct": 1.5, "fingerprint": "3f9a0c51d2e7", "lr_schedule": "cosine"}
    assert problems_of(MetricsRecord, tmp_path / "metrics.json", old) == []
    parsed = MetricsRecord.model_validate(old)
    assert parsed.model_extra is not None and parsed.model_extra["mfu_pct"] == 1.5
    failed = {**old, "status": "failed", "failed_at_step": 40, "error": "DiskFullError: ..."}
    assert problems_of(MetricsRecord, tmp_path / "metrics.json", failed) == []
    # a run that failed before its first evaluation, as scripts/train.py records it
    assert problems_of(MetricsRecord, tmp_path / "m.json", {"status": "failed", "error": "x"}) == []


def test_a_real_runs_records_validate(tiny_run, tmp_path):
    """Every metrics.json a run writes passes its model (RunMetrics.write checks each
    one, so every run the suite trains is checked); the one on disk is read back here."""
    from lib.train.naming import create_run_dir
    from lib.train.trainer import Trainer

    run = tiny_run(GPT2_MAX_ITERS=4, GPT2_EVAL_INTERVAL=2, RUN_NAME="records")
    run_dir = create_run_dir(run)
    Trainer(run, run_dir, log=lambda _: None).train()
    record = json.loads((run_dir / "metrics.json").read_text())
    assert record["status"] == "completed"
    assert problems_of(MetricsRecord, run_dir / "metrics.json", record) == []


def test_the_json_schema_comes_from_the_model():
    schema = MetricsRecord.model_json_schema()
    assert schema["required"] == ["status"]
    assert schema["properties"]["iterations"]["anyOf"][0] == {"minimum": 0, "type": "integer"}
    assert TuningRecord.model_json_schema()["required"] == ["config", "symbols", "budget", "trials"]
