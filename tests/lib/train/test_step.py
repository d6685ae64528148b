"""TrainStep's order with a pruner and a clip: the pruned weights' gradients are
zeroed first, then the gradient norm is clipped (the reference trainer's order),
so the clip coefficient is that of the gradients the optimizer applies."""

from __future__ import annotations

import copy

import torch
from torch import nn

from lib.prune.pruner import Pruner
from lib.speed.precision import Precision
from lib.train.step import TrainStep

CLIP = 0.05


class TwoLayers(nn.Module):
    """forward(x, y) -> (out, loss), the contract TrainStep relies on."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(8, 16), nn.Linear(16, 4)

    def forward(self, x, y):
        out = self.fc2(torch.tanh(self.fc1(x)))
        return out, ((out - y) ** 2).mean()


def test_pruned_gradients_are_masked_before_the_norm_is_clipped():
    torch.manual_seed(0)
    model = TwoLayers()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    # Magnitude pruning of fc1 to 50 % after step 1 (warmup 0, ramp end 1).
    pruner = Pruner(
        [("fc1.weight", model.fc1.weight)],
        method="magnitude",
        target=0.5,
        warmup=0,
        ramp_end=1,
        frequency=1,
        schedule="linear",
        scope="global",
        optimizer=optimizer,
    )
    step = TrainStep(
        model,
        optimizer,
        Precision(torch.device("cpu"), "fp32", "test"),
        accumulation=1,
        grad_clip=CLIP,
        pruner=pruner,
    )
    g = torch.Generator().manual_seed(1)
    batches = [
        (torch.randn(32, 8, generator=g), torch.randn(32, 4, generator=g) * 3) for _ in range(2)
    ]
    step(lambda: batches[0], lr=0.1, step=1)
    mask = pruner.masks[0]
    assert (~mask).sum().item() == mask.numel() // 2  # half of fc1.weight pruned

    # By hand: step 2's raw gradients, fc1.weight's pruned entries zeroed, then
    # torch's clip (coefficient CLIP / (norm + 1e-6), at most 1).
    ref = copy.deepcopy(model)
    ref(*batches[1])[1].backward()
    raw = {name: p.grad.clone() for name, p in ref.named_parameters()}
    masked = dict(raw, **{"fc1.weight": raw["fc1.weight"] * mask})
    norm = torch.linalg.vector_norm(
        torch.stack([torch.linalg.vector_norm(t) for t in masked.values()])
    )
    coefficient = min(1.0, CLIP / (norm.item() + 1e-6))
    unmasked_norm = torch.linalg.vector_norm(
        torch.stack([torch.linalg.vector_norm(t) for t in raw.values()])
    )
    # The other order (clip, then mask) would use the larger norm: a different coefficient.
    assert coefficient < 1 and unmasked_norm.item() > 1.05 * norm.item()

    seen = {}
    hook = optimizer.register_step_pre_hook(
        lambda *_: seen.update({n: p.grad.clone() for n, p in model.named_parameters()})
    )
    step(lambda: batches[1], lr=0.1, step=2)
    hook.remove()
    for name, grad in masked.items():
        torch.testing.assert_close(seen[name], grad * coefficient, rtol=1e-5, atol=1e-8)
    assert torch.all(seen["fc1.weight"][~mask] == 0)
