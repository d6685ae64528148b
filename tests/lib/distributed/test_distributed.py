"""Several processes: DDP with gloo on the CPU equals one process, resumes exactly."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

from lib.distributed.runtime import torchrun_command
from lib.run.checkpoint import load_checkpoint
from lib.run.owner import release
from lib.train.naming import create_run_dir
from lib.train.trainer import Trainer
from tests.conftest import ROOT

SETTINGS = dict(
    GPT2_MAX_ITERS=6,
    GPT2_EVAL_INTERVAL=3,
    GPT2_GRADIENT_ACCUMULATION=2,
    GPT2_WARMUP_STEPS=0,
    LEARNING_RATE="3e-3",
    GPT2_MIN_LR="3e-3",
)


# Muon's rounding reaches the AdamW-trained embeddings through the loss, and Adam's
# normalised step turns a tiny gradient difference on a near-zero gradient into a
# fraction of one step: a tenth of one step at LR 3e-3 (measured on one 2-core host:
# 1.5e-4 on 13 % of wte after 4 steps).
ADAMW_BESIDE_MUON_ATOL = 3e-4
# bfloat16 keeps 8 significant bits, and five quintic Newton-Schulz iterations on
# inputs that differ in their last float32 bits can round apart by a few per cent of
# the result; over 4 steps, a quarter of one Muon update (MUON_LR 0.02). Measured:
# 1e-3 on one host, 2.4e-3 on another (an AVX-512 Xeon, 3 % of one matrix).
MUON_ATOL = 5e-3


def launch(run_dir, *args):
    """scripts/train.py on an existing run folder, as `make` runs it; returns metrics.json.
    create_run_dir made this process the folder's owner: hand it over to the child."""
    release(run_dir)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, "scripts/train.py", f"RUN_DIR={run_dir}", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "launching:" in done.stdout and "--nproc-per-node=2" in done.stdout
    return json.loads((run_dir / "metrics.json").read_text())


@pytest.mark.slow  # two torchrun launches of two processes; the command is checked fast below
def test_ddp_on_two_processes_matches_one_process_with_the_same_effective_batch(tiny_run):
    single = Trainer(
        tiny_run(RUN_NAME="single", BATCH_SIZE=8, **SETTINGS),
        create_run_dir(tiny_run(RUN_NAME="single", BATCH_SIZE=8, **SETTINGS)),
        log=lambda _: None,
    )
    alone = single.train()
    # 2 ranks x micro-batch 4 x accumulation 2 = 16 = 1 x 8 x 2. The first run stops
    # after 4 steps; `make continue`-style it resumes to 6 (constant LR, so the
    # schedule does not depend on MAX_ITERS).
    ddp = tiny_run(
        RUN_NAME="ddp",
        BATCH_SIZE=4,
        GPT2_USE_DDP="y",
        GPT2_NUM_GPUS=2,
        **{**SETTINGS, "GPT2_MAX_ITERS": 4, "GPT2_EVAL_INTERVAL": 2},
    )
    run_dir = create_run_dir(ddp)
    first = launch(run_dir)
    assert first["status"] == "completed" and first["world_size"] == 2
    assert first["effective_batch_size"] == alone["effective_batch_size"] == 16
    metrics = launch(run_dir, "MAX_ITERS=6")
    assert metrics["status"] == "completed" and metrics["iterations"] == 6
    assert [e["event"] for e in metrics["events"]] == ["resumed"]
    assert metrics["train_loss"]["iters"] == alone["train_loss"]["iters"]
    assert metrics["train_loss"]["values"] == pytest.approx(alone["train_loss"]["values"], rel=1e-5)
    weights = load_checkpoint(run_dir / "ckpt_latest.pt")["model"]
    for name, value in single.training.model.state_dict().items():
        torch.testing.assert_close(weights[name], value, rtol=1e-4, atol=1e-5, msg=name)


@pytest.mark.slow
def test_ddp_muon_matches_one_process(tiny_run):
    """Every rank orthogonalises the same averaged gradient, so Muon under DDP
    is one process's Muon. The averaged gradient equals one process's up to
    float rounding, and bfloat16 Newton-Schulz can round such inputs apart
    apart (see MUON_ATOL), so Muon's matrices, the AdamW parameters beside them
    and the losses (moved by 2e-5 on one host) are compared to match."""
    settings = dict(SETTINGS, OPTIMIZER_MUON="y", GPT2_MAX_ITERS=4, GPT2_EVAL_INTERVAL=4)
    run = tiny_run(RUN_NAME="single", BATCH_SIZE=8, **settings)
    single = Trainer(run, create_run_dir(run), log=lambda _: None)
    alone = single.train()
    ddp = tiny_run(RUN_NAME="ddp", BATCH_SIZE=4, GPT2_USE_DDP="y", GPT2_NUM_GPUS=2, **settings)
    run_dir = create_run_dir(ddp)
    metrics = launch(run_dir)
    assert metrics["status"] == "completed" and metrics["optimizer"] == "muon"
    assert metrics["train_loss"]["values"] == pytest.approx(
        alone["train_loss"]["values"], rel=1e-4
    )  # bf16 Newton-Schulz: see above
    weights = load_checkpoint(run_dir / "ckpt_latest.pt")["model"]
    muon = {
        id(p) for g in single.training.optimizer.param_groups if g["use_muon"] for p in g["params"]
    }
    for name, value in single.training.model.named_parameters():
        atol = MUON_ATOL if id(value) in muon else ADAMW_BESIDE_MUON_ATOL
        torch.testing.assert_close(weights[name], value.detach(), rtol=1e-4, atol=atol, msg=name)


def test_torchrun_command_for_one_and_several_machines(tiny_run):
    one = torchrun_command(
        tiny_run(GPT2_USE_DDP="y", GPT2_NUM_GPUS=4).distributed, "scripts/train.py", []
    )
    assert one[1:] == [
        "-m",
        "torch.distributed.run",
        "--nproc-per-node=4",
        "--nnodes=1",
        "--standalone",
        "scripts/train.py",
    ]
    many = torchrun_command(
        tiny_run(
            GPT2_USE_DDP="y",
            GPT2_NUM_GPUS=8,
            DIST_NNODES=2,
            DIST_RDZV_ENDPOINT="node0:29400",
            DIST_RDZV_ID="job7",
        ).distributed,
        "scripts/train.py",
        ["MAX_ITERS=5"],
    )
    assert many[3:] == [
        "--nproc-per-node=8",
        "--nnodes=2",
        "--rdzv-backend=c10d",
        "--rdzv-endpoint=node0:29400",
        "--rdzv-id=job7",
        "scripts/train.py",
        "MAX_ITERS=5",
    ]
    with pytest.raises(ValueError, match="DIST_RDZV_ENDPOINT"):
        torchrun_command(
            tiny_run(GPT2_USE_DDP="y", DIST_NNODES=2).distributed, "scripts/train.py", []
        )


def _alone_and_fsdp(tiny_run, settings, **fsdp_only):
    """One process at batch 8 trained to its end (the trainer and its metrics), and
    the folder of the same run on 2 FSDP processes at batch 4, not launched yet."""
    run = tiny_run(RUN_NAME="single", BATCH_SIZE=8, **settings)
    single = Trainer(run, create_run_dir(run), log=lambda _: None)
    alone = single.train()
    fsdp = tiny_run(
        RUN_NAME="fsdp",
        BATCH_SIZE=4,
        GPT2_USE_DDP="y",
        GPT2_NUM_GPUS=2,
        DIST_STRATEGY_FSDP="y",
        **{**settings, **fsdp_only},
    )
    return single, alone, create_run_dir(fsdp)


@pytest.mark.slow  # about 25 s on 2 cores; DDP above covers the launch path
def test_fsdp_on_two_processes_matches_one_process(tiny_run):
    settings = dict(SETTINGS, GPT2_MAX_ITERS=3, GPT2_EVAL_INTERVAL=3)
    single, alone, run_dir = _alone_and_fsdp(tiny_run, settings)
    metrics = launch(run_dir)
    assert metrics["status"] == "completed" and metrics["world_size"] == 2
    assert metrics["train_loss"]["values"] == pytest.approx(alone["train_loss"]["values"], rel=1e-5)
    weights = load_checkpoint(run_dir / "ckpt_latest.pt")["model"]  # gathered, unsharded
    for name, value in single.training.model.state_dict().items():
        torch.testing.assert_close(weights[name], value, rtol=1e-4, atol=1e-5, msg=name)


@pytest.mark.slow  # about 4 s on 2 idle cores; the DDP test covers Muon's default path
def test_fsdp_muon_gathers_each_matrix_and_matches_one_process(tiny_run):
    """Under FSDP each rank holds row shards: Newton-Schulz runs on the gathered
    matrix, so the result is one process's (tolerances as for DDP above)."""
    settings = dict(SETTINGS, OPTIMIZER_MUON="y", GPT2_MAX_ITERS=3, GPT2_EVAL_INTERVAL=3)
    single, alone, run_dir = _alone_and_fsdp(tiny_run, settings)
    metrics = launch(run_dir)
    assert metrics["status"] == "completed" and metrics["world_size"] == 2
    assert metrics["train_loss"]["values"] == pytest.approx(
        alone["train_loss"]["values"], rel=1e-4
    )  # bf16 Newton-Schulz: see above
    state = load_checkpoint(run_dir / "ckpt_latest.pt")  # gathered, unsharded
    muon = {
        id(p) for g in single.training.optimizer.param_groups if g["use_muon"] for p in g["params"]
    }
    for name, value in single.training.model.named_parameters():
        atol = MUON_ATOL if id(value) in muon else ADAMW_BESIDE_MUON_ATOL
        torch.testing.assert_close(
            state["model"][name], value.detach(), rtol=1e-4, atol=atol, msg=name
        )
    buffers = [
        s["momentum_buffer"] for s in state["optimizer"]["state"].values() if "momentum_buffer" in s
    ]
    whole = [
        tuple(p.shape)
        for g in single.training.optimizer.param_groups
        if g["use_muon"]
        for p in g["params"]
    ]
    assert sorted(tuple(b.shape) for b in buffers) == sorted(whole)  # not row shards


PRUNE_FSDP = dict(
    SETTINGS,
    PRUNING_MODE_SINGLE="y",
    PRUNING_TARGET_SPARSITY="0.5",
    PRUNING_WARMUP=1,
    PRUNING_RAMP_END=4,
    PRUNING_FREQUENCY=1,
    GPT2_MAX_ITERS=6,
    GPT2_EVAL_INTERVAL=6,
)


@pytest.mark.slow  # about 13 s each on 2 idle cores (two launches)
@pytest.mark.parametrize(
    "method, extra",
    [
        ("MAGNITUDE", {"PRUNING_HEAD": "y"}),  # a global threshold; the head tied to wte
        ("MOVEMENT", {"PRUNING_SCOPE_PER_LAYER": "y"}),
        ("MOVEMENT", {"PRUNING_MOVEMENT_KNLP": "y"}),  # masks re-chosen from w (w - w0)
        ("STATE", {"OPTIMIZER_ADAMWPRUNE": "y", "ADAMWPRUNE_VARIANT_BITTER7": "y"}),
    ],
)
def test_fsdp_pruning_on_two_processes_matches_one_process(tiny_run, method, extra):
    """Each rank holds a row shard of every weight: the masks must still be chosen
    from the whole tensors' scores (a threshold over one shard would prune each
    shard to the target on its own), so they, the sparsity and the losses are one
    process's, also across a resume (masks and movement scores saved whole)."""
    settings = dict(PRUNE_FSDP, **extra, **{f"PRUNING_METHOD_{method}": "y"})
    single, alone, run_dir = _alone_and_fsdp(
        tiny_run, settings, GPT2_MAX_ITERS=4, GPT2_EVAL_INTERVAL=4
    )
    launch(run_dir)
    metrics = launch(run_dir, "MAX_ITERS=6")  # knlp's rule updates again after the resume
    assert metrics["status"] == "completed" and metrics["world_size"] == 2
    assert [e["event"] for e in metrics["events"]] == ["resumed"]
    assert alone["sparsity"] == pytest.approx(0.5, abs=0.01)
    assert metrics["sparsity"] == alone["sparsity"]
    assert metrics["train_loss"]["values"] == pytest.approx(alone["train_loss"]["values"], rel=1e-5)
    state = load_checkpoint(run_dir / "ckpt_latest.pt")  # gathered, unsharded
    pruner = single.training.pruner
    assert state["pruner"]["names"] == pruner.names
    for name, saved, mask in zip(pruner.names, state["pruner"]["masks"], pruner.masks):
        assert torch.equal(saved, mask), name
        assert torch.equal(state["model"][name] == 0, ~mask | (state["model"][name] == 0)), name
    weights = single.training.model.state_dict()
    for name, value in weights.items():
        torch.testing.assert_close(state["model"][name], value, rtol=1e-4, atol=1e-5, msg=name)
