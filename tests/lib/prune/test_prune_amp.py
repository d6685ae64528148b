"""Movement pruning under fp16 loss scaling: a real GradScaler on the CPU, one
forced overflow. Scores must hold true (unscaled) gradients and a step the
scaler skips must add nothing."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from lib.prune.pruner import Pruner
from lib.speed.precision import Precision
from lib.train.step import TrainStep

INIT_SCALE = 2.0**16


class Tiny(nn.Module):
    """forward(x, y) -> (out, loss), the contract TrainStep relies on."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(6, 4)

    def forward(self, x, y):
        out = self.fc(x)
        return out, ((out.float() - y) ** 2).mean()


def true_gradient(model: Tiny, x, y) -> torch.Tensor:
    """The weight's gradient of the same fp16-autocast loss, without any scaling."""
    ref = copy.deepcopy(model)
    with torch.autocast("cpu", dtype=torch.float16):
        loss = ref(x, y)[1]
    loss.backward()
    return ref.fc.weight.grad.float()


def test_movement_scores_are_unscaled_and_skip_overflowed_steps():
    try:
        torch.amp.GradScaler("cpu", init_scale=INIT_SCALE)
        with torch.autocast("cpu", dtype=torch.float16):
            nn.Linear(2, 2)(torch.ones(1, 2))
    except (RuntimeError, TypeError, ValueError) as err:
        pytest.skip(f"no fp16 autocast with a GradScaler on this CPU build: {err}")
    torch.manual_seed(0)
    model = Tiny()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    pruner = Pruner(
        [("fc.weight", model.fc.weight)],
        method="movement",
        target=0.5,
        warmup=10,
        ramp_end=20,
        frequency=5,
        schedule="linear",
        scope="global",
        optimizer=optimizer,
    )
    step = TrainStep(
        model,
        optimizer,
        Precision(torch.device("cpu"), "fp16", "test"),
        accumulation=1,
        grad_clip=0.0,
        pruner=pruner,
    )
    step.scaler = torch.amp.GradScaler("cpu", init_scale=INIT_SCALE)
    g = torch.Generator().manual_seed(1)
    batches = [(torch.randn(8, 6, generator=g), torch.randn(8, 4, generator=g)) for _ in range(4)]
    batches[1] = (batches[1][0] * 1e5, batches[1][1])  # fp16 activations overflow to inf

    expected = torch.zeros_like(model.fc.weight)
    for i, (x, y) in enumerate(batches, start=1):
        weight, scale = model.fc.weight.detach().clone(), step.scaler.get_scale()
        before = pruner.scores[0].clone()
        if i != 2:
            expected -= weight * true_gradient(model, x, y)
        step(lambda x=x, y=y: (x, y), lr=1e-2, step=i)
        assert torch.isfinite(pruner.scores[0]).all()
        if i == 2:  # the scaler found inf: step skipped, scale halved, scores untouched
            assert step.scaler.get_scale() == scale / 2
            assert torch.equal(model.fc.weight.detach(), weight)
            assert torch.equal(pruner.scores[0], before)
        else:
            assert step.scaler.get_scale() == scale
            assert not torch.equal(model.fc.weight.detach(), weight)
        # Scaled by INIT_SCALE (65536) without the unscale, inf or NaN without the skip.
        torch.testing.assert_close(pruner.scores[0], expected, rtol=1e-3, atol=1e-6)
    assert expected.abs().max() > 1e-2  # the comparison is not between zeros
