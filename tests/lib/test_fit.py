"""Automatic micro-batch and accumulation: the effective batch is kept exactly."""

from __future__ import annotations

import json

import pytest

from lib.config.run_config import run_config_from_defaults
from lib.estimate import estimate_memory
from lib.estimate.fit import divisors, plan_batch
from lib.hardware.devices import profile, profile_info
from lib.train.naming import create_run_dir
from lib.train.trainer import Trainer

GPT2_124M = {
    "GPT2_MODEL_124M": "y",
    "GPT2_BLOCK_SIZE": "1024",
    "GPT2_PAD_VOCAB": "y",
    "MIXED_PRECISION_DTYPE_BF16": "y",
    "BATCH_SIZE": "12",
    "GPT2_GRADIENT_ACCUMULATION": "3",
}


def test_divisors_largest_first():
    assert divisors(12) == [12, 6, 4, 3, 2, 1] and divisors(1) == [1]
    assert divisors(49) == [49, 7, 1]


def test_manual_mode_keeps_the_configured_values():
    run = run_config_from_defaults(GPT2_124M)
    planned, plan = plan_batch(run, profile_info(profile("L4")), 1, 50257)
    assert (plan.mode, plan.batch_size, plan.accumulation) == ("manual", 12, 3)
    assert planned.values == run.values


@pytest.mark.parametrize("gpu, world", [("L4", 1), ("RTX 3060", 1), ("H100", 1), ("H100", 4)])
def test_auto_mode_picks_the_largest_fitting_divisor_and_keeps_the_effective_batch(gpu, world):
    run = run_config_from_defaults(
        {**GPT2_124M, "HYPER_PARAM_AUTO": "y", "TARGET_EFFECTIVE_BATCH": "96"}
    )
    info = profile_info(profile(gpu))
    planned, plan = plan_batch(run, info, world, 50257)
    assert (
        plan.mode == "auto"
        and plan.effective == 96 == planned.derived(world)["effective_batch_size"]
    )
    assert planned.BATCH_SIZE * planned.GPT2_GRADIENT_ACCUMULATION * world == 96
    fits = estimate_memory(planned, 50257, device_info=info)
    assert fits.fits(info.memory_bytes) and plan.estimate_bytes == fits.total_bytes
    larger = [d for d in divisors(96 // world) if d > plan.batch_size]
    if larger:  # the next larger micro-batch would not fit
        assert not estimate_memory(planned, 50257, batch_size=min(larger), device_info=info).fits(
            info.memory_bytes
        )
    assert (
        plan.batch_size
        == {("L4", 1): 16, ("RTX 3060", 1): 8, ("H100", 1): 48, ("H100", 4): 24}[(gpu, world)]
    )


def test_auto_mode_refuses_a_target_the_world_size_does_not_divide():
    run = run_config_from_defaults(
        {**GPT2_124M, "HYPER_PARAM_AUTO": "y", "TARGET_EFFECTIVE_BATCH": "30"}
    )
    with pytest.raises(ValueError, match="TARGET_EFFECTIVE_BATCH=30 is not divisible by .* 4"):
        plan_batch(run, profile_info(profile("H100")), 4, 50257)


def test_trainer_in_auto_mode_records_its_choice(tiny_run):
    run = tiny_run(
        HYPER_PARAM_AUTO="y",
        TARGET_EFFECTIVE_BATCH=12,
        GPT2_MAX_ITERS=2,
        GPT2_EVAL_INTERVAL=2,
        RUN_NAME="auto",
    )
    assert run.derived()["effective_batch_size"] == 12
    trainer = Trainer(run, create_run_dir(run), log=lambda _: None)
    summary = trainer.train()
    assert summary["status"] == "completed" and summary["effective_batch_size"] == 12
    # A tiny model on a machine's RAM: the whole batch fits in one micro-batch.
    assert (summary["micro_batch_size"], summary["gradient_accumulation"]) == (12, 1)
    on_disk = json.loads((trainer.run_dir / "metrics.json").read_text())
    assert on_disk["batch_plan"]["mode"] == "auto" and on_disk["batch_plan"]["effective"] == 12
    assert on_disk["memory_estimate_mb"] > 0
