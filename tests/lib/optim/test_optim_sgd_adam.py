"""SGD, Adam and AdamWAdv (lib/optim build_optimizer): a few float64 steps against
the update rules written out here, weight decay on the decay group only."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from lib.config.kconfig import load_strict
from lib.config.run_config import load_run_config, write_outputs
from lib.optim import build_optimizer

STEPS, LR, DECAY = 4, 0.05, 0.1


class Tiny(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(3, 2)

    def param_groups(self, weight_decay: float, rule: str = "") -> list[dict]:  # build_optimizer
        return [
            {"params": [self.fc.weight], "weight_decay": weight_decay},
            {"params": [self.fc.bias], "weight_decay": 0.0},
        ]


def run_for(write_config, tmp_path, *lines: str):
    base = ['CONFIG_LEARNING_RATE="0.05"', 'CONFIG_WEIGHT_DECAY="0.1"']
    if "CONFIG_OPTIMIZER_SGD=y" not in lines:  # the Adam family's beta2, hidden for SGD
        base.append('CONFIG_ADAM_BETA2="0.99"')
    kconf = load_strict(write_config(*base, *lines))
    write_outputs(kconf, tmp_path / ".config", tmp_path / "config.py")
    return load_run_config([], tmp_path / ".config")


def grads(step: int) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(step)
    return [
        torch.randn(2, 3, generator=gen, dtype=torch.float64) * 3,
        torch.randn(2, generator=gen, dtype=torch.float64),
    ]


def trained(run) -> tuple[list[torch.Tensor], list[torch.Tensor], torch.optim.Optimizer]:
    """(start, end) parameters after STEPS steps on fixed gradients, and the optimizer."""
    torch.manual_seed(0)
    model = Tiny().double()
    start = [p.detach().clone() for p in (model.fc.weight, model.fc.bias)]
    opt = build_optimizer(run.optim, run.LEARNING_RATE, model, torch.device("cpu"))
    for step in range(1, STEPS + 1):
        for p, g in zip((model.fc.weight, model.fc.bias), grads(step)):
            p.grad = g.clone()
        opt.step()
    return start, [model.fc.weight.detach(), model.fc.bias.detach()], opt


def sgd_rule(start, momentum: float) -> list[torch.Tensor]:
    out = []
    for i, p in enumerate(start):
        p, buf, wd = p.clone(), None, DECAY if i == 0 else 0.0
        for step in range(1, STEPS + 1):
            d = grads(step)[i] + wd * p  # L2: decay joins the gradient
            buf = d if buf is None else momentum * buf + d
            p = p - LR * buf
        out.append(p)
    return out


def adam_rule(start, decoupled: bool, amsgrad: bool, b1=0.9, b2=0.99, eps=1e-8):
    out = []
    for i, p in enumerate(start):
        p, wd = p.clone(), DECAY if i == 0 else 0.0
        m, v, vmax = torch.zeros_like(p), torch.zeros_like(p), torch.zeros_like(p)
        for step in range(1, STEPS + 1):
            g = grads(step)[i]
            if decoupled:
                p = p * (1 - LR * wd)
            else:
                g = g + wd * p
            m = b1 * m + (1 - b1) * g
            v = b2 * v + (1 - b2) * g * g
            vmax = torch.maximum(vmax, v)
            denom = (vmax if amsgrad else v).sqrt() / math.sqrt(1 - b2**step) + eps
            p = p - LR / (1 - b1**step) * m / denom
        out.append(p)
    return out


@pytest.mark.parametrize("impl", ["LOOP", "FOREACH", "AUTO"])
def test_sgd_is_heavy_ball_momentum_with_l2_decay(write_config, tmp_path, impl):
    run = run_for(
        write_config,
        tmp_path,
        "CONFIG_OPTIMIZER_SGD=y",
        'CONFIG_SGD_MOMENTUM="0.8"',
        f"CONFIG_OPTIMIZER_IMPL_{impl}=y",
    )
    start, end, opt = trained(run)
    assert isinstance(opt, torch.optim.SGD) and opt.defaults["nesterov"] is False
    for got, want in zip(end, sgd_rule(start, 0.8)):
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    # decoupled decay would have moved the weight elsewhere
    assert not torch.allclose(end[0], adam_rule(start, True, False)[0])


def test_adam_adds_decay_to_the_gradient_and_honours_amsgrad(write_config, tmp_path):
    for amsgrad in (False, True):
        lines = ["CONFIG_OPTIMIZER_ADAM=y", "CONFIG_OPTIMIZER_IMPL_LOOP=y"]
        run = run_for(
            write_config, tmp_path, *lines, f"CONFIG_ADAM_AMSGRAD={'y' if amsgrad else 'n'}"
        )
        start, end, opt = trained(run)
        assert type(opt) is torch.optim.Adam
        for got, want in zip(end, adam_rule(start, decoupled=False, amsgrad=amsgrad)):
            torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-12)
        # not AdamW's update: the L2 term went through the second moment
        assert not torch.allclose(end[0], adam_rule(start, True, amsgrad)[0], atol=1e-9)


def test_adamwadv_is_adamw_with_amsgrad_always(write_config, tmp_path):
    run = run_for(
        write_config, tmp_path, "CONFIG_OPTIMIZER_ADAMWADV=y", "CONFIG_OPTIMIZER_IMPL_LOOP=y"
    )
    assert run.ADAM_AMSGRAD is None  # hidden: AdamWAdv has no switch for it
    start, end, opt = trained(run)
    assert type(opt) is torch.optim.AdamW and opt.defaults["amsgrad"] is True
    for got, want in zip(end, adam_rule(start, decoupled=True, amsgrad=True)):
        torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-12)
    assert not torch.allclose(end[0], adam_rule(start, True, False)[0], atol=1e-9)
