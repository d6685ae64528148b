"""Pruned entries stay exactly zero: gradients masked before the step, the
multi-tensor path against masked_fill, on CUDA, and the masks reapplied every
step only under optimizers that could move a zero."""

from __future__ import annotations

import pytest
import torch

from lib.prune.pruner import Pruner
from tests.lib.prune.tiny_run import batches, make_model, train


def test_before_step_zeroes_pruned_gradients():
    p = torch.nn.Parameter(torch.tensor([[3.0, -0.1], [0.2, -4.0]]))
    pruner = Pruner(
        [("w", p)],
        method="magnitude",
        target=0.5,
        warmup=0,
        ramp_end=1,
        frequency=1,
        schedule="linear",
        scope="global",
    )
    pruner.after_step(1)
    p.grad = torch.ones_like(p)
    pruner.before_step(2)
    assert p.grad.tolist() == [[1.0, 0.0], [0.0, 1.0]]
    assert p.detach().tolist() == [[3.0, 0.0], [0.0, -4.0]]


class MaskedFillPruner(Pruner):
    """Masks applied tensor by tensor with masked_fill: the reference for exact zeros."""

    @torch.no_grad()
    def before_step(self, step: int) -> None:
        for i, p in enumerate(self.params):
            if p.grad is not None and self.pruned[i]:
                p.grad.masked_fill_(~self.masks[i], 0)

    @torch.no_grad()
    def apply_masks(self) -> None:
        for i, p in enumerate(self.params):
            if self.pruned[i]:
                dropped = ~self.masks[i]
                p.masked_fill_(dropped, 0)
                for key in ("exp_avg", "exp_avg_sq"):
                    self.optimizer.state[p][key].masked_fill_(dropped, 0)


@pytest.mark.parametrize("method", ["magnitude", "state"])
def test_multi_tensor_masking_holds_masks_exactly_every_step(method):
    # AdamWPrune on AdamWSPAM (multi-tensor path, resets and clipping active): after
    # every step the pruned weights and moments are exactly zero, and everything
    # equals the same run with masks applied by masked_fill.
    from lib.optim.spam import AdamWSPAM

    runs = []
    for cls in (Pruner, MaskedFillPruner):
        model, _ = make_model()
        optimizer = AdamWSPAM(
            model.parameters(), lr=3e-3, theta=50.0, interval=7, warmup_steps=3, clip_skip_steps=2
        )  # clipping from call 2 on
        pruner = cls(
            model.prunable(),
            method=method,
            schedule="linear",
            scope="global",
            optimizer=optimizer,
            target=0.5,
            warmup=2,
            ramp_end=12,
            frequency=2,
        )
        runs.append((model, optimizer, pruner))
    data = batches(14)
    for step in range(1, 15):
        for model, optimizer, pruner in runs:
            train(model, optimizer, pruner, data, step, step)
            for (_, p), mask in zip(model.prunable(), pruner.masks):
                state = optimizer.state[p]
                for t in (p, state["exp_avg"], state["exp_avg_sq"]):
                    assert int(torch.count_nonzero(t.detach()[~mask])) == 0
        (a, opt_a, pr_a), (b, opt_b, pr_b) = runs
        assert all(torch.equal(x, y) for x, y in zip(pr_a.masks, pr_b.masks))
        for x, y in zip(a.parameters(), b.parameters()):
            assert torch.equal(x, y)
            for key in ("exp_avg", "exp_avg_sq"):
                assert torch.equal(opt_a.state[x][key], opt_b.state[y][key])
    assert pr_a.report()["sparsity"] == pytest.approx(0.5, abs=0.005)
    assert opt_a.stats()["resets"] == 2 and opt_a.stats()["spikes_clipped"] > 0


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_masks_hold_exactly_on_cuda():
    torch.manual_seed(0)
    params = [torch.nn.Parameter(torch.randn(64, 32, device="cuda")) for _ in range(3)]
    optimizer = torch.optim.AdamW(params, lr=1e-2)
    pruner = Pruner(
        [(f"w{i}", p) for i, p in enumerate(params)],
        method="magnitude",
        target=0.5,
        warmup=0,
        ramp_end=1,
        frequency=1,
        schedule="linear",
        scope="global",
        optimizer=optimizer,
    )
    for step in (1, 2, 3):
        for p in params:
            p.grad = torch.randn_like(p)
        pruner.before_step(step)
        optimizer.step()
        pruner.after_step(step)
        for p, mask in zip(params, pruner.masks):
            for t in (p, optimizer.state[p]["exp_avg"], optimizer.state[p]["exp_avg_sq"]):
                assert int(torch.count_nonzero(t.detach()[~mask])) == 0


@pytest.mark.parametrize("opt, every_step", [("adamw_fused", False), ("sgd", True)])
def test_masks_are_reapplied_only_when_the_optimizer_could_move_a_zero(
    opt, every_step, monkeypatch
):
    # Under Adam a pruned entry (weight, moments, gradient 0) stays exactly 0, so the
    # masks are applied at mask updates only; other rules get them every step.
    model, _ = make_model()
    optimizer = (
        torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.1, fused=True)
        if opt == "adamw_fused"
        else torch.optim.SGD(model.parameters(), lr=3e-3, momentum=0.9)
    )
    pruner = Pruner(
        model.prunable(),
        method="magnitude",
        schedule="linear",
        scope="global",
        optimizer=optimizer,
        target=0.5,
        warmup=2,
        ramp_end=6,
        frequency=2,
    )
    applied = []
    real = pruner.apply_masks
    monkeypatch.setattr(pruner, "apply_masks", lambda: (applied.append(pruner.step), real()))
    train(model, optimizer, pruner, batches(12), 1, 12)
    assert applied == (list(range(1, 13)) if every_step else [4, 6])  # updates after 4 and 6
    for (_, p), mask in zip(model.prunable(), pruner.masks):
        assert int(torch.count_nonzero(p.detach()[~mask])) == 0
