"""Pruning masks under FSDP2: each rank keeps its rows of the mask one process would choose."""

from __future__ import annotations

import json

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn

from lib.prune.pruner import Pruner

ROWS, COLS = 7, 6  # 7 rows over 2 ranks: uneven shards (4 + 3), as FSDP2 chunks them


def pruner_for(weight: nn.Parameter, method: str) -> Pruner:
    return Pruner(
        [("w", weight)],
        method=method,
        target=0.5,
        warmup=0,
        ramp_end=1,
        frequency=1,
        schedule="linear",
        scope="global",
    )


def _rank(rank: int, init: str, out: str) -> None:
    from torch.distributed.fsdp import fully_shard

    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=2)
    try:
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(COLS, ROWS, bias=False))
        fully_shard(model)
        weight = model[0].weight
        pruner = pruner_for(weight, "movement")
        # a movement score that differs by row, so a per-shard threshold would be wrong
        weight.grad = torch.distributed.tensor.distribute_tensor(
            torch.arange(ROWS * COLS, dtype=torch.float32).reshape(ROWS, COLS) - 20.0,
            weight.device_mesh,
            weight.placements,
        )
        pruner.before_step(1)
        pruner.after_step(1)
        state = pruner.state_dict()
        record = {
            "local_mask_rows": pruner.masks[0].to_local().shape[0],
            "local_score_rows": pruner.scores[0].to_local().shape[0],
            "mask": state["masks"][0].tolist(),
            "pruned": pruner.pruned,
            "weight": weight.full_tensor().tolist(),
        }
        if rank == 0:
            with open(out, "w") as f:
                json.dump(record, f)
        # Both ranks done before either tears gloo down: a rank leaving while the
        # other's last collective is in flight aborted it once ("terminate called
        # without an active exception", SIGABRT).
        dist.barrier()
    finally:
        dist.destroy_process_group()


@pytest.mark.slow  # two spawned processes importing torch: about 6 s on 2 idle cores
def test_fsdp_masks_are_sharded_like_their_weights_and_chosen_as_one_process_chooses(tmp_path):
    out = tmp_path / "rank0.json"
    mp.spawn(_rank, args=(f"file://{tmp_path / 'store'}", str(out)), nprocs=2)
    record = json.loads(out.read_text())
    assert record["local_mask_rows"] == record["local_score_rows"] == 4  # rank 0's chunk of 7

    torch.manual_seed(0)
    weight = nn.Linear(COLS, ROWS, bias=False).weight
    pruner = pruner_for(weight, "movement")
    weight.grad = torch.arange(ROWS * COLS, dtype=torch.float32).reshape(ROWS, COLS) - 20.0
    pruner.before_step(1)
    pruner.after_step(1)
    assert record["pruned"] == pruner.pruned == [21]
    assert torch.equal(torch.tensor(record["mask"]), pruner.masks[0])
    assert torch.equal(torch.tensor(record["weight"]), weight.detach())


def test_memory_estimate_divides_the_sharded_masks_and_scores_by_the_world_size():
    from lib.config.run_config import run_config_from_defaults
    from lib.estimate import estimate_memory
    from lib.estimate.memory import model_counts, pruning_bytes
    from lib.hardware.devices import profile, profile_info

    h100 = profile_info(profile("H100 SXM 80GB"))
    base = dict(GPT2_MODEL_124M="y", GPT2_BLOCK_SIZE="1024", BATCH_SIZE="8", GPT2_PAD_VOCAB="y")
    fsdp = dict(base, GPT2_USE_DDP="y", GPT2_NUM_GPUS="2", DIST_STRATEGY_FSDP="y")
    prune = dict(PRUNING_MODE_SINGLE="y", PRUNING_METHOD_MOVEMENT="y", PRUNING_HEAD="y")
    runs = {
        (world, pruned): run_config_from_defaults({**settings, **(prune if pruned else {})})
        for world, settings in ((1, base), (2, fsdp))
        for pruned in (False, True)
    }
    optimizer = {k: estimate_memory(r, 50257, device_info=h100).optimizer for k, r in runs.items()}
    extra = pruning_bytes(runs[1, True], model_counts(runs[1, True], 50257)[1])
    assert extra > 124_000_000 * 4  # an fp32 score and a bool mask per pruned weight
    assert optimizer[1, True] - optimizer[1, False] == extra
    assert abs((optimizer[2, True] - optimizer[2, False]) - extra / 2) <= 1
