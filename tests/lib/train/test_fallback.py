"""The out-of-memory ladder: eager, then smaller micro-batches, effective batch kept."""

from __future__ import annotations

import json

import pytest
import torch

from gpt2.model import GPT2
from lib.config.run_config import run_config_from_defaults
from lib.estimate.fit import BatchPlan
from lib.speed.compile import CompileOff
from lib.train.fallback import (
    GUARDED_STEPS,
    FirstSteps,
    SmallerBatch,
    is_out_of_memory,
    smaller_batch,
)
from lib.train.naming import create_run_dir
from lib.train.trainer import Trainer

SETTINGS = dict(GPT2_MAX_ITERS=6, GPT2_EVAL_INTERVAL=3)


def train(run):
    trainer = Trainer(run, create_run_dir(run), log=lambda _: None)
    return trainer, trainer.train()


def test_smaller_batch_is_the_largest_divisor_at_most_half():
    assert [smaller_batch(b, 1) for b in (12, 6, 3, 1, 7)] == [6, 3, 1, None, 1]
    assert smaller_batch(8, 4) == 4 and smaller_batch(4, 4) is None


def test_out_of_memory_is_recognised_also_when_wrapped():
    oom = torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
    wrapped = RuntimeError("backend compiler failed")
    wrapped.__cause__ = oom
    assert is_out_of_memory(oom) and is_out_of_memory(wrapped)
    assert is_out_of_memory(RuntimeError("DefaultCPUAllocator: can't allocate memory"))
    assert not is_out_of_memory(ValueError("shapes do not match"))


def plan(batch, accumulation):
    return BatchPlan("manual", batch, accumulation, 1, "as configured")


def settings(**symbols: str):
    """Every symbol at its default, plus these (validated as overrides are)."""
    return run_config_from_defaults(symbols)


def first_steps(distributed: bool, **symbols: str) -> FirstSteps:
    run = settings(**symbols)
    return FirstSteps(run.train, run.speed, distributed=distributed)


OOM = torch.OutOfMemoryError("CUDA out of memory (simulated)")


def test_decisions_walk_the_ladder_without_a_trainer():
    guard = first_steps(False, TRAIN_OOM_FALLBACK="y", TRAIN_OOM_MIN_BATCH="2")
    error = "OutOfMemoryError: CUDA out of memory (simulated)"
    assert guard.decide(OOM, True, False, plan(8, 1)) == CompileOff("oom_fallback", error)
    first = guard.decide(OOM, False, True, plan(8, 1))
    assert first == SmallerBatch(8, 4, 2, error)
    assert guard.decide(OOM, False, True, plan(4, 2)).accumulation == 4
    with pytest.raises(RuntimeError, match="micro-batch 2.*TRAIN_OOM_MIN_BATCH=2") as raised:
        guard.decide(OOM, False, True, plan(2, 4))
    assert raised.value.__cause__ is OOM
    # The records metrics.json keeps, field for field.
    assert first.record() == {
        "event": "oom_fallback",
        "action": "smaller_batch",
        "batch_size": 4,
        "accumulation": 2,
        "error": first.error,
    }
    assert CompileOff("oom_fallback", "e").record() == {
        "event": "oom_fallback",
        "error": "e",
        "action": "eager",
    }


def test_other_failures_turn_compile_off_once_unless_strict():
    crash = RuntimeError("backend exploded")
    guard = first_steps(False, TRAIN_OOM_FALLBACK="y")
    assert guard.decide(crash, True, False, plan(8, 1)).record() == {
        "event": "compile_failed",
        "error": "RuntimeError: backend exploded",
    }
    with pytest.raises(RuntimeError, match="^backend exploded$"):  # compile proven: a real error
        guard.decide(crash, False, True, plan(8, 1))
    strict = first_steps(False, COMPILE_MODEL="y", COMPILE_STRICT="y")
    with pytest.raises(RuntimeError, match="COMPILE_STRICT"):
        strict.decide(crash, True, False, plan(8, 1))
    several = first_steps(True, TRAIN_OOM_FALLBACK="y")
    with pytest.raises(torch.OutOfMemoryError):  # ranks cannot agree on a batch mid-step
        several.decide(OOM, True, False, plan(8, 1))


def test_guarded_steps_count_from_the_start_or_resume_and_wait_for_compile():
    guard = first_steps(False)
    assert [guard.guards(done, True) for done in range(10, 15)] == [True] * GUARDED_STEPS + [
        False,
        False,
    ]
    assert guard.guards(20, compile_proven=False)


def test_a_rebatched_plan_is_a_new_value_with_the_same_effective_batch():
    before = plan(8, 1)
    after = before.rebatched(2, 4, "out of memory")
    assert (after.mode, after.batch_size, after.accumulation, after.effective) == (
        "fallback",
        2,
        4,
        8,
    )
    assert (before.batch_size, before.accumulation) == (8, 1)
    with pytest.raises(ValueError, match="effective batch 8"):
        before.rebatched(2, 3, "wrong")


@pytest.fixture
def memory_limit(monkeypatch):
    """GPT2.forward runs out of memory above `limit[0]` sequences while training,
    and a compiled model always does (as a compilation that runs out would)."""
    limit = [2]
    forward = GPT2.forward

    def limited(self, idx, targets=None):
        if torch.is_grad_enabled() and idx.size(0) > limit[0]:
            raise torch.OutOfMemoryError(f"CUDA out of memory (simulated, {idx.size(0)} rows)")
        return forward(self, idx, targets)

    def compiled(model, *options):
        def run(*args, **kwargs):
            raise RuntimeError("compilation failed") from torch.OutOfMemoryError("simulated")

        return run

    monkeypatch.setattr(GPT2, "forward", limited)
    monkeypatch.setattr("lib.speed.apply.compile_model", compiled)
    return limit


def test_ladder_ends_in_a_working_run_and_records_each_step(tiny_run, memory_limit):
    trainer, summary = train(
        tiny_run(RUN_NAME="ladder", BATCH_SIZE=8, COMPILE_MODEL="y", **SETTINGS)
    )
    assert summary["status"] == "completed" and summary["iterations"] == 6
    steps = [
        (e["event"], e.get("action"), e.get("batch_size"), e.get("accumulation"))
        for e in summary["events"]
    ]
    assert steps == [
        ("oom_fallback", "eager", None, None),
        ("oom_fallback", "smaller_batch", 4, 2),
        ("oom_fallback", "smaller_batch", 2, 4),
    ]
    assert summary["compiled"] is False and "compilation failed" in summary["compile_error"]
    assert (summary["micro_batch_size"], summary["gradient_accumulation"]) == (2, 4)
    assert summary["effective_batch_size"] == 8 and summary["tokens_seen"] == 6 * 8 * 32
    # What ran is what a run configured with 2 x 4 computes: the same batches in the
    # same order (one sampler draw of 8 offsets = four draws of 2).
    _, direct = train(
        tiny_run(RUN_NAME="direct", BATCH_SIZE=2, GPT2_GRADIENT_ACCUMULATION=4, **SETTINGS)
    )
    assert summary["train_loss"]["values"] == pytest.approx(
        direct["train_loss"]["values"], rel=1e-5
    )
    on_disk = json.loads((trainer.run_dir / "metrics.json").read_text())
    assert on_disk["micro_batch_size"] == 2 and len(on_disk["events"]) == 3


def test_ladder_stops_at_its_floor(tiny_run, memory_limit):
    run = tiny_run(RUN_NAME="floor", BATCH_SIZE=8, TRAIN_OOM_MIN_BATCH=4, **SETTINGS)
    with pytest.raises(RuntimeError, match="micro-batch 4.*TRAIN_OOM_MIN_BATCH=4"):
        train(run)


def test_ladder_switched_off_stops_at_the_first_out_of_memory(tiny_run, memory_limit):
    run = tiny_run(RUN_NAME="strict", BATCH_SIZE=8, TRAIN_OOM_FALLBACK="n", **SETTINGS)
    with pytest.raises(torch.OutOfMemoryError, match="simulated, 8 rows"):
        train(run)
