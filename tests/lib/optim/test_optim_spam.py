"""AdamWSPAM by hand: the update, clipping and its windows, resets, warmup, checkpoints.
(The step-by-step comparison with the authors' algorithm is test_optim_spam_reference.py.)"""

from __future__ import annotations

import copy
import io
import math

import pytest
import torch

from lib.optim.spam import AdamWSPAM

B1, B2 = 0.9, 0.999

PATHS = pytest.mark.parametrize("foreach", [None, False], ids=["default", "per_parameter"])


def adam_delta(m, v, count, lr, scale=1.0, eps=1e-6):
    """The authors' update of one coordinate: eps on the root of the raw v."""
    return -lr * scale * math.sqrt(1 - B2**count) / (1 - B1**count) * m / (math.sqrt(v) + eps)


@PATHS
def test_first_step_by_hand_eps_on_raw_root_and_decay_after_update(foreach):
    p = torch.tensor([2.0, -1.0], dtype=torch.float64, requires_grad=True)
    opt = AdamWSPAM([p], lr=0.1, betas=(B1, B2), eps=1e-3, weight_decay=0.5, foreach=foreach)
    p.grad = torch.tensor([0.5, -0.25], dtype=torch.float64)
    opt.step()
    # Entry 0: m = 0.05, sqrt(v) = 0.0158114, step size 0.1 * sqrt(1e-3) / 0.1 = 0.0316228:
    # update 0.0316228 * 0.05 / (0.0158114 + 1e-3) = 0.0940517, then p = (2 - 0.0940517) * 0.95.
    want = [1.8106509312794377, -0.8656673324274794]
    torch.testing.assert_close(
        p.detach(), torch.tensor(want, dtype=torch.float64), rtol=1e-13, atol=0
    )
    # torch.optim.AdamW (decay first, eps on sqrt(v_hat)) would give 1.8001996 and -0.8503984.
    assert abs(p[0].item() - 1.8001996007984031) > 0.01
    assert opt.stats() == {"spikes_clipped": 0, "resets": 0}


@PATHS
def test_spike_clipping_by_hand(foreach):
    lr, wd, theta = 0.1, 0.01, 5000.0
    p = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64, requires_grad=True)
    opt = AdamWSPAM(
        [p],
        lr=lr,
        betas=(B1, B2),
        weight_decay=wd,
        theta=theta,
        reset=False,
        clip_skip_steps=2,
        foreach=foreach,
    )
    small = [0.1, -0.2, 0.3]
    x, m, v = [1.0, 2.0, 3.0], [0.0] * 3, [0.0] * 3  # reference state, updated by hand
    for step in range(1, 4):  # no spike: nothing clipped from call 2 on
        p.grad = torch.tensor(small, dtype=torch.float64)
        opt.step()
        for i, g in enumerate(small):
            m[i] = B1 * m[i] + (1 - B1) * g
            v[i] = B2 * v[i] + (1 - B2) * g * g
            x[i] = (x[i] + adam_delta(m[i], v[i], step, lr)) * (1 - lr * wd)
    assert opt.stats()["spikes_clipped"] == 0
    torch.testing.assert_close(p.detach(), torch.tensor(x, dtype=torch.float64), rtol=1e-12, atol=0)
    # v after 3 equal gradients: (1 - B2^3) g^2; entry 0: 2.997001e-3 * 0.01 = 2.997001e-5.
    assert v[0] == pytest.approx(2.997001e-5, rel=1e-9)
    # Entry 0: 100^2 > 5000 * 2.997001e-5 = 0.14985 -> +sqrt(0.14985005) = 0.3871047;
    # entry 2: -50 -> -sqrt(5000 * 2.997001e-3 * 0.09) = -1.1613141; entry 1 unchanged.
    clipped = [math.sqrt(theta * v[0]), -0.2, -math.sqrt(theta * v[2])]
    assert clipped[0] == pytest.approx(0.3871047, rel=1e-6)
    assert clipped[2] == pytest.approx(-1.1613141, rel=1e-6)
    grad_before = torch.tensor([100.0, -0.2, -50.0], dtype=torch.float64)
    p.grad = grad_before.clone()
    opt.step()
    assert torch.equal(p.grad, grad_before)  # the optimizer does not edit p.grad
    for i, g in enumerate(clipped):
        m[i] = B1 * m[i] + (1 - B1) * g
        v[i] = B2 * v[i] + (1 - B2) * g * g
        x[i] = (x[i] + adam_delta(m[i], v[i], 4, lr)) * (1 - lr * wd)
    for got, want in (
        (p.detach(), x),
        (opt.state[p]["exp_avg"], m),
        (opt.state[p]["exp_avg_sq"], v),
    ):
        torch.testing.assert_close(got, torch.tensor(want, dtype=torch.float64), rtol=1e-12, atol=0)
    assert opt.stats() == {"spikes_clipped": 2, "resets": 0}


@PATHS
@pytest.mark.parametrize(
    "reset, clipped_calls",
    [
        (True, [2, 3, 4, 7, 8, 9, 12]),  # k >= 2 and k % 5 >= 2
        (False, list(range(2, 13))),  # without resets: k >= 2
    ],
)
def test_clipping_windows(foreach, reset, clipped_calls):
    # Every gradient is 10x the last, a spike for theta = 1, so a call clips iff its
    # window allows (after a reset v is 0 and an entry is clipped to 0).
    p = torch.zeros(1, dtype=torch.float64, requires_grad=True)
    opt = AdamWSPAM(
        [p], theta=1.0, interval=5, warmup_steps=0, clip_skip_steps=2, reset=reset, foreach=foreach
    )
    seen = []
    for k in range(1, 13):
        p.grad = torch.tensor([10.0**k], dtype=torch.float64)
        before = opt.stats()["spikes_clipped"]
        opt.step()
        if opt.stats()["spikes_clipped"] > before:
            seen.append(k)
    assert seen == clipped_calls
    assert opt.clips_at(12) and not opt.clips_at(1)


@PATHS
def test_reset_zeroes_moments_and_keeps_the_bias_correction_count(foreach):
    p = torch.ones(4, dtype=torch.float64, requires_grad=True)
    idle = torch.ones(2, dtype=torch.float64, requires_grad=True)  # no gradient on the reset call
    opt = AdamWSPAM([p, idle], lr=1e-2, interval=3, warmup_steps=0, clip=False, foreach=foreach)
    gen = torch.Generator().manual_seed(1)
    for step in range(1, 8):
        p.grad = torch.randn(4, generator=gen, dtype=torch.float64)
        idle.grad = None if step == 6 else torch.ones(2, dtype=torch.float64)
        opt.step()
        assert opt.stats()["resets"] == step // 3
        if step in (3, 6):  # reset at the start of the call: the moments hold this gradient only
            torch.testing.assert_close(
                opt.state[p]["exp_avg"], (1 - B1) * p.grad, rtol=1e-15, atol=0
            )
            torch.testing.assert_close(
                opt.state[p]["exp_avg_sq"], (1 - B2) * p.grad**2, rtol=1e-15, atol=0
            )
        if step == 6:  # like the authors' code, a parameter without a gradient is not reset
            torch.testing.assert_close(
                opt.state[idle]["exp_avg"],  # calls 3-5 since its reset
                torch.full((2,), 1 - B1**3, dtype=torch.float64),
            )
    assert float(opt.state[p]["step"]) == 7.0 and float(opt.state[idle]["step"]) == 6.0
    restarted = AdamWSPAM([p], interval=3, restart_bias_correction=True, foreach=foreach)
    for _ in range(4):
        p.grad = torch.ones(4, dtype=torch.float64)
        restarted.step()
    assert float(restarted.state[p]["step"]) == 2.0  # calls 3 and 4
    for kw in ({"reset": False, "interval": 3}, {"interval": 0}):
        q = torch.ones(2, requires_grad=True)
        o = AdamWSPAM([q], **kw)
        for _ in range(7):
            q.grad = torch.ones(2)
            o.step()
        assert o.stats()["resets"] == 0 and float(o.state[q]["step"]) == 7.0


@PATHS
def test_warmup_after_a_reset(foreach):
    lr, n = 0.01, 3
    p = torch.zeros(1, dtype=torch.float64, requires_grad=True)
    opt = AdamWSPAM(
        [p], lr=lr, betas=(B1, B2), clip=False, interval=5, warmup_steps=n, foreach=foreach
    )
    # s = 1 - 0.99 (1 + cos(pi j / 4)) / 2 with j calls since the reset (call 5).
    expected_scale = {
        1: 1.0,
        2: 1.0,
        3: 1.0,
        4: 1.0,  # no warmup before the first reset
        5: 1 - 0.99,  # j = 0: the reset call gets 0.01
        6: 0.15498214331265903,  # j = 1: 1 - 0.495 (1 + 0.70710678)
        7: 0.505,  # j = 2: 1 - 0.495
        8: 1.0,
        9: 1.0,
    }  # j >= N: full update
    m = v = 0.0
    for step in range(1, 10):
        g = 0.1 * step * (-1) ** step
        if step == 5:
            m = v = 0.0
        m = B1 * m + (1 - B1) * g
        v = B2 * v + (1 - B2) * g * g
        before = p.item()
        p.grad = torch.tensor([g], dtype=torch.float64)
        opt.step()  # the count keeps going: bias correction with t = step
        assert p.item() - before == pytest.approx(
            adam_delta(m, v, step, lr, expected_scale[step]), rel=1e-12, abs=0
        )
    assert opt.update_scale(0) == 1 - 0.99 and opt.update_scale(n) == 1.0
    assert AdamWSPAM([p], warmup_steps=0).update_scale(0) == 1.0  # 0 disables the warmup
    assert opt.stats()["resets"] == 1


def test_state_dict_round_trip_resumes_identically():
    gen = torch.Generator().manual_seed(7)
    params = [
        torch.randn(6, 4, generator=gen).requires_grad_(),
        torch.randn(4, generator=gen).requires_grad_(),
    ]

    def make(ps):
        return AdamWSPAM(
            [
                {"params": ps[:1], "names": ["w"], "weight_decay": 0.1},
                {"params": ps[1:], "names": ["b"], "weight_decay": 0.0},
            ],
            lr=1e-2,
            theta=3.0,
            interval=4,
            warmup_steps=3,
            clip_skip_steps=2,
        )

    grads = [
        [torch.randn(6, 4, generator=gen) * (1 + 20 * (i % 4 == 1)), torch.randn(4, generator=gen)]
        for i in range(12)
    ]
    opt = make(params)

    def run(o, ps, steps):
        for i in steps:
            for p, g in zip(ps, grads[i]):
                p.grad = g.clone()
            o.step()

    run(opt, params, range(5))  # stop inside the warmup after the reset at call 4
    saved_params = [p.detach().clone() for p in params]
    buf = io.BytesIO()
    torch.save(opt.state_dict(), buf)
    mid_stats = opt.stats()
    assert mid_stats["resets"] == 1 and mid_stats["spikes_clipped"] > 0
    assert opt.state_dict()["spam"] == {
        "global_step": 5,
        "warmup_count": 2,
        "spikes_clipped": mid_stats["spikes_clipped"],
        "resets": 1,
    }
    run(opt, params, range(5, 12))

    resumed = [t.clone().requires_grad_() for t in saved_params]
    opt2 = make(resumed)
    buf.seek(0)
    opt2.load_state_dict(torch.load(buf, weights_only=True))
    assert opt2.stats() == mid_stats
    run(opt2, resumed, range(5, 12))
    for a, b in zip(params, resumed):
        assert torch.equal(a, b)
        for key in ("exp_avg", "exp_avg_sq", "step"):
            assert torch.equal(opt.state[a][key], opt2.state[b][key])
    assert opt2.stats() == opt.stats() and opt.stats()["resets"] == 3
    assert opt2.param_groups[1]["names"] == ["b"] and opt2.param_groups[1]["weight_decay"] == 0.0
    sd = copy.deepcopy(opt2.state_dict())
    assert sd["spam"]["global_step"] == 12 and sd["spam"]["warmup_count"] == 1
    # Without the warmup counter (it is needed): the resumed run would differ.
    del sd["spam"]["warmup_count"]
    buf.seek(0)
    partial = torch.load(buf, weights_only=True)
    del partial["spam"]["warmup_count"]
    again = [t.clone().requires_grad_() for t in saved_params]
    opt3 = make(again)
    opt3.load_state_dict(partial)
    run(opt3, again, range(5, 12))
    assert not torch.equal(again[0], params[0])


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"lr": 0.0}, "lr"),
        ({"lr": -1e-3}, "lr"),
        ({"betas": (1.0, 0.999)}, "betas"),
        ({"betas": (0.9, -0.1)}, "betas"),
        ({"eps": 0.0}, "eps"),
        ({"weight_decay": -0.1}, "weight_decay"),
        ({"theta": 0.0}, "theta"),
        ({"interval": -1}, "interval"),
        ({"warmup_steps": -5}, "warmup_steps"),
        ({"clip_skip_steps": 1.5}, "clip_skip_steps"),
    ],
)
def test_invalid_arguments(kwargs, name):
    p = torch.zeros(2, requires_grad=True)
    with pytest.raises(ValueError, match=name):
        AdamWSPAM([p], **kwargs)
