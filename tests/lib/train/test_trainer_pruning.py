"""Training with SPAM and pruning: sparsity reached, masks exact across resume,
state memory as claimed."""

from __future__ import annotations

import json

import pytest
import torch

from lib.run.checkpoint import load_checkpoint
from lib.train.naming import create_run_dir
from lib.train.trainer import Trainer
from tests.lib.stops import train_until

PRUNE = dict(
    PRUNING_MODE_SINGLE="y",
    PRUNING_WARMUP=4,
    PRUNING_RAMP_END=20,
    PRUNING_FREQUENCY=4,
    GPT2_MAX_ITERS=24,
    GPT2_EVAL_INTERVAL=8,
)


def train(run, stop_after=None, resume=None, run_dir=None):
    run_dir = run_dir or create_run_dir(run)
    trainer = Trainer(run, run_dir, log=lambda _: None, resume=resume)
    return trainer, train_until(trainer, stop_after), run_dir


@pytest.mark.parametrize(
    "method, extra",
    [
        ("MAGNITUDE", {}),
        ("MOVEMENT", {"PRUNING_SCOPE_PER_LAYER": "y"}),
        ("STATE", {"OPTIMIZER_ADAMWPRUNE": "y", "ADAMWPRUNE_VARIANT_BITTER7": "y"}),
    ],
)
def test_pruned_run_ends_at_target_sparsity_with_zero_weights(tiny_run, method, extra):
    run = tiny_run(
        **PRUNE,
        **extra,
        **{f"PRUNING_METHOD_{method}": "y"},
        PRUNING_TARGET_SPARSITY="0.7",
        RUN_NAME=f"prune-{method}",
    )
    trainer, summary, run_dir = train(run)
    assert summary["status"] == "completed"
    assert summary["sparsity"] == pytest.approx(0.7, abs=0.005)
    assert json.loads((run_dir / "metrics.json").read_text())["sparsity"] == summary["sparsity"]
    state = load_checkpoint(run_dir / "ckpt_latest.pt")
    zeros = total = 0
    for name, _ in trainer.training.model.prunable():
        w = state["model"][name]
        zeros, total = zeros + int((w == 0).sum()), total + w.numel()
    assert zeros / total == pytest.approx(0.7, abs=0.005)  # in the saved weights themselves
    assert summary["sparsity_series"]["values"][0] == 0.0  # dense during warmup


@pytest.mark.parametrize(
    "extra, variant, budget, schedule",
    [
        ({"ADAMWPRUNE_VARIANT_BITTER4": "y"}, "bitter4", "depth", "cubic"),
        (
            {
                "ADAMWPRUNE_VARIANT_BITTER4": "y",
                "ADAMWPRUNE_BITTER4_RANK_BUDGET": "y",
                "PRUNING_SCHEDULE_CUBIC_LATE": "y",
            },
            "bitter4",
            "rank",
            "cubic_late",
        ),
        ({"ADAMWPRUNE_VARIANT_OBD": "y"}, "obd", "depth", "cubic"),
        ({"ADAMWPRUNE_VARIANT_TOWARD_ZERO": "y"}, "toward_zero", "depth", "cubic"),
    ],
)
def test_kconfig_picks_the_state_score_and_bitter4_budget(
    tiny_run, extra, variant, budget, schedule
):
    run = tiny_run(
        **PRUNE,
        OPTIMIZER_ADAMWPRUNE="y",
        PRUNING_METHOD_STATE="y",
        **extra,
        RUN_NAME=f"pick-{variant}-{budget}",
    )
    pruner = Trainer(run, create_run_dir(run), log=lambda _: None).training.pruner
    assert (pruner.variant, pruner.bitter4_budget, pruner.schedule) == (variant, budget, schedule)


def test_adamwprune_adds_only_a_boolean_mask(tiny_run):
    _, dense, _ = train(tiny_run(GPT2_MAX_ITERS=3, RUN_NAME="dense"))
    trainer, pruned, _ = train(tiny_run(**PRUNE, OPTIMIZER_ADAMWPRUNE="y", RUN_NAME="awp"))
    prunable = sum(p.numel() for _, p in trainer.training.model.prunable())
    assert pruned["optimizer_state_breakdown"]["pruning"] == prunable  # one byte per weight
    assert pruned["optimizer_state_breakdown"]["optimizer"] == dense["optimizer_state_bytes"]


def test_resume_keeps_masks_and_matches_uninterrupted_run(tiny_run):
    settings = dict(**PRUNE, PRUNING_METHOD_MOVEMENT="y")
    _, whole, _ = train(tiny_run(RUN_NAME="whole", **settings))
    _, _, run_dir = train(tiny_run(RUN_NAME="parts", **settings), stop_after=10)
    state = load_checkpoint(run_dir / "ckpt_latest.pt")
    trainer = Trainer(
        tiny_run(RUN_NAME="parts", **settings), run_dir, log=lambda _: None, resume=state
    )
    for mask, saved in zip(trainer.training.pruner.state_dict()["masks"], state["pruner"]["masks"]):
        assert torch.equal(mask, saved)
    resumed = trainer.train()
    assert resumed["train_loss"] == whole["train_loss"]
    assert resumed["sparsity"] == whole["sparsity"]


def test_spam_run_counts_resets_and_logs_them(tiny_run):
    run = tiny_run(
        OPTIMIZER_ADAMWSPAM="y",
        SPAM_INTERVAL=10,
        SPAM_WARMUP_STEPS=3,
        SPAM_CLIP_SKIP_STEPS=3,  # below the interval, as the loader requires
        GPT2_MAX_ITERS=25,
        GPT2_EVAL_INTERVAL=25,
        RUN_NAME="spam",
    )
    lines: list[str] = []
    trainer = Trainer(run, create_run_dir(run), log=lines.append)
    summary = trainer.train()
    assert summary["spam_resets"] == 2 and summary["spam_spikes_clipped"] >= 0
    assert any("resets 2" in line for line in lines)
    assert summary["val_loss"]["values"][-1] < summary["train_loss"]["values"][0]


def test_the_log_says_which_optimizer_and_pruning_run(tiny_run):
    """The run's first lines name the optimizer as built (class, implementation, which
    tensors decay) and the pruning schedule; they once named neither."""
    from lib.train.build import build_training

    run = tiny_run(**PRUNE, PRUNING_METHOD_MAGNITUDE="y", WEIGHT_DECAY="0.05")
    training = build_training(run, torch.device("cpu"), 40)
    lines = training.describe()
    groups = training.optimizer.param_groups
    decayed = sum(len(g["params"]) for g in groups if g["weight_decay"])
    total = sum(len(g["params"]) for g in groups)
    assert 0 < decayed < total
    assert lines[0].startswith("optimizer: AdamW (")
    assert lines[0].endswith(f"; weight decay 0.05 on {decayed} of {total} tensors"), lines[0]
    assert lines[1] == (
        f"pruning: magnitude to {run.PRUNING_TARGET_SPARSITY:.0%} sparsity, {run.PRUNING_SCOPE}, "
        f"{run.PRUNING_SCHEDULE} from step 4 to 20, masks every 4 steps"
    ), lines[1]
    dense = build_training(tiny_run(WEIGHT_DECAY="0"), torch.device("cpu"), 40).describe()
    assert dense[0].endswith("; no weight decay") and dense[1].startswith("torch.compile:")
