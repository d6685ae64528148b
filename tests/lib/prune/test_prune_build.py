"""build_pruner: which weights a run's pruner masks (lib/prune/build.py)."""

from __future__ import annotations

import torch
from torch import nn

from lib.config.run_config import RunConfig, load_valid, typed_values
from lib.prune.build import build_pruner


class TiedLM(nn.Module):
    """The two things build_pruner asks of a model: its block weights and its head."""

    def __init__(self) -> None:
        super().__init__()
        self.block = nn.Linear(8, 8, bias=False)
        self.wte = nn.Embedding(16, 8)
        self.lm_head = nn.Linear(8, 16, bias=False)
        self.lm_head.weight = self.wte.weight

    def prunable(self) -> list[tuple[str, nn.Parameter]]:
        return [("block.weight", self.block.weight)]


def pruner_for(write_config, *lines: str):
    kconf = load_valid(
        write_config(
            "CONFIG_PRUNING_MODE_SINGLE=y",
            "CONFIG_PRUNING_METHOD_MAGNITUDE=y",
            'CONFIG_PRUNING_TARGET_SPARSITY="0.5"',
            *lines,
        ),
        [],
    )
    model = TiedLM()
    optimizer = torch.optim.AdamW(model.parameters())
    run = RunConfig.from_values(typed_values(kconf))
    return model, build_pruner(run.prune, model, optimizer, run.TRAIN_SEED)


def test_the_head_is_pruned_only_when_asked(write_config):
    model, pruner = pruner_for(write_config)
    assert pruner is not None and pruner.names == ["block.weight"]
    model, pruner = pruner_for(write_config, "CONFIG_PRUNING_HEAD=y")
    assert pruner is not None and pruner.names == ["block.weight", "lm_head.weight"]
    # one global threshold over both: at the ramp's end half of all 192 entries are pruned,
    # and the tied embedding loses exactly the head's pruned entries (the same matrix)
    with torch.no_grad():
        model.block.weight.copy_(torch.arange(64.0).view(8, 8) + 1000)  # all kept
        model.wte.weight.copy_(torch.arange(128.0).view(16, 8) + 1)
    pruner.after_step(pruner.ramp_end)
    assert int((model.wte.weight == 0).sum()) == 96 and bool((model.block.weight != 0).all())
