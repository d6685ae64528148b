"""AdamWSPAM: AdamW equivalence, spike clipping, momentum reset, warmup, checkpoints."""
from __future__ import annotations

import copy
import io
import math

import pytest
import torch

from lib.optim.spam import AdamWSPAM

B1, B2, EPS = 0.9, 0.999, 1e-8


def feed(params, gen, scale=1.0):
    """Set p.grad from a fixed generator (same shapes/dtypes as the params)."""
    for p in params:
        p.grad = torch.randn(p.shape, generator=gen, dtype=p.dtype) * scale


def adam_delta(m, v, count, lr, scale=1.0, eps=EPS):
    """Plain-Python AdamW update (no decay) of one coordinate from its moments."""
    m_hat = m / (1 - B1 ** count)
    v_hat = v / (1 - B2 ** count)
    return -scale * lr * m_hat / (math.sqrt(v_hat) + eps)


PATHS = pytest.mark.parametrize("foreach", [None, False], ids=["default", "per_parameter"])


@PATHS
def test_matches_torch_adamw_without_clip_and_reset(foreach):
    gen = torch.Generator().manual_seed(0)
    shapes = [(4, 5), (5,), (3, 2, 2)]
    init = [torch.randn(s, generator=gen) for s in shapes]
    ours = [t.clone().requires_grad_() for t in init]
    ref = [t.clone().requires_grad_() for t in init]

    def groups(ps):
        return [{"params": ps[:2], "names": ["w", "b"], "weight_decay": 0.1},
                {"params": ps[2:], "names": ["n"], "weight_decay": 0.0}]

    kw = dict(lr=3e-3, betas=(0.85, 0.99), eps=1e-7)
    opt = AdamWSPAM(groups(ours), **kw, clip=False, reset=False, foreach=foreach)
    ref_opt = torch.optim.AdamW(groups(ref), **kw, foreach=False)
    for step in range(25):
        g = torch.Generator().manual_seed(100 + step)
        feed(ours, g)
        feed(ref, torch.Generator().manual_seed(100 + step))
        opt.step()
        ref_opt.step()
    for a, b, start in zip(ours, ref, init):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-7)
        assert not torch.equal(a.detach(), start)
        for key in ("exp_avg", "exp_avg_sq"):
            torch.testing.assert_close(opt.state[a][key], ref_opt.state[b][key], rtol=1e-6, atol=0)
        assert float(opt.state[a]["step"]) == 25.0
    assert opt.param_groups[0]["names"] == ["w", "b"] and opt.param_groups[1]["names"] == ["n"]
    assert opt.param_groups[0]["weight_decay"] == 0.1 and opt.param_groups[1]["weight_decay"] == 0.0
    assert opt.stats() == {"spikes_clipped": 0, "resets": 0}


@PATHS
def test_spike_clipping_by_hand(foreach):
    lr, wd, theta = 0.1, 0.01, 5000.0
    p = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64, requires_grad=True)
    opt = AdamWSPAM([p], lr=lr, betas=(B1, B2), eps=EPS, weight_decay=wd, theta=theta, reset=False,
                    foreach=foreach)
    small = [0.1, -0.2, 0.3]
    # Reference state per coordinate, updated by hand.
    x, m, v = [1.0, 2.0, 3.0], [0.0] * 3, [0.0] * 3
    for step in range(1, 4):
        p.grad = torch.tensor(small, dtype=torch.float64)
        opt.step()
        for i, g in enumerate(small):
            m[i] = B1 * m[i] + (1 - B1) * g
            v[i] = B2 * v[i] + (1 - B2) * g * g
            x[i] = x[i] * (1 - lr * wd) + adam_delta(m[i], v[i], step, lr)
    assert opt.stats()["spikes_clipped"] == 0
    torch.testing.assert_close(p.detach(), torch.tensor(x, dtype=torch.float64), rtol=1e-12, atol=0)
    # v after 3 equal gradients: (1 - B2^3) g^2; entry 0: 2.997001e-3 * 0.01 = 2.997001e-5.
    assert v[0] == pytest.approx(2.997001e-5, rel=1e-9)
    spike = [100.0, -0.2, -50.0]
    # Entry 0: 100^2 > 5000*2.997001e-5 = 0.14985 -> +sqrt(0.14985005) = 0.387104702...
    # Entry 2: v = 2.997001e-3*0.09, limit = 1.34865045 -> -sqrt(...) = -1.161314106...
    # Entry 1: 0.04 vs 5000*2.997001e-3*0.04 = 0.5994 -> unchanged.
    clipped = [math.sqrt(theta * v[0]), -0.2, -math.sqrt(theta * v[2])]
    assert clipped[0] == pytest.approx(0.3871047, rel=1e-6)
    assert clipped[2] == pytest.approx(-1.1613141, rel=1e-6)
    grad_before = torch.tensor(spike, dtype=torch.float64)
    p.grad = grad_before.clone()
    opt.step()
    assert torch.equal(p.grad, grad_before)  # the optimizer does not edit p.grad
    for i, g in enumerate(clipped):
        m[i] = B1 * m[i] + (1 - B1) * g
        v[i] = B2 * v[i] + (1 - B2) * g * g
        x[i] = x[i] * (1 - lr * wd) + adam_delta(m[i], v[i], 4, lr)
    torch.testing.assert_close(p.detach(), torch.tensor(x, dtype=torch.float64), rtol=1e-12, atol=0)
    torch.testing.assert_close(opt.state[p]["exp_avg"], torch.tensor(m, dtype=torch.float64),
                               rtol=1e-12, atol=0)
    torch.testing.assert_close(opt.state[p]["exp_avg_sq"], torch.tensor(v, dtype=torch.float64),
                               rtol=1e-12, atol=0)
    assert opt.stats() == {"spikes_clipped": 2, "resets": 0}


def test_clip_threshold_uses_raw_second_moment_and_skips_zero_v():
    # First step: v_prev == 0 -> a huge gradient is not clipped.
    p = torch.zeros(2, dtype=torch.float64, requires_grad=True)
    opt = AdamWSPAM([p], lr=1e-3, weight_decay=0.0, theta=5000.0, reset=False)
    p.grad = torch.tensor([1e6, 1.0], dtype=torch.float64)
    opt.step()
    assert opt.stats()["spikes_clipped"] == 0
    # Step 2: v_prev = 1e-3 * g1^2, so the limit is theta*1e-3 = 5 x g1^2 (|g2| > 2.236 |g1|).
    p.grad = torch.tensor([2.2e6, 2.3], dtype=torch.float64)
    opt.step()
    assert opt.stats()["spikes_clipped"] == 1
    # clip=False never clips.
    q = torch.zeros(1, requires_grad=True)
    off = AdamWSPAM([q], clip=False, reset=False)
    for g in (1.0, 1e4):
        q.grad = torch.tensor([g])
        off.step()
    assert off.stats()["spikes_clipped"] == 0


@PATHS
def test_momentum_reset_every_interval(foreach):
    p = torch.ones(4, dtype=torch.float64, requires_grad=True)
    opt = AdamWSPAM([p], lr=1e-2, theta=5000.0, interval=3, warmup_steps=0, foreach=foreach)
    gen = torch.Generator().manual_seed(1)
    clipped_before_6 = None
    for step in range(1, 8):
        if step == 6:
            clipped_before_6 = opt.stats()["spikes_clipped"]
        if step == 3:
            p.grad = torch.zeros(4, dtype=torch.float64)  # moments stay at the reset value
        elif step == 6:
            p.grad = torch.tensor([1e3, -2.0, 0.5, -1e4], dtype=torch.float64)
        else:
            feed([p], gen)
        opt.step()
        state = opt.state[p]
        assert opt.stats()["resets"] == step // 3
        if step == 3:  # reset at the start of step 3, then a zero gradient
            assert torch.count_nonzero(state["exp_avg"]) == 0
            assert torch.count_nonzero(state["exp_avg_sq"]) == 0
            assert float(state["step"]) == 1.0  # bias-correction count restarted
        if step == 6:  # moments hold only g6; no clipping right after a reset (v_prev == 0)
            torch.testing.assert_close(state["exp_avg"], (1 - B1) * p.grad, rtol=1e-15, atol=0)
            torch.testing.assert_close(state["exp_avg_sq"], (1 - B2) * p.grad ** 2,
                                       rtol=1e-15, atol=0)
            assert opt.stats()["spikes_clipped"] == clipped_before_6
    assert float(opt.state[p]["step"]) == 2.0  # steps 6 and 7
    for kw in ({"reset": False, "interval": 3}, {"interval": 0}):
        q = torch.ones(2, requires_grad=True)
        o = AdamWSPAM([q], **kw)
        for _ in range(7):
            q.grad = torch.ones(2)
            o.step()
        assert o.stats()["resets"] == 0 and float(o.state[q]["step"]) == 7.0


@PATHS
def test_cosine_warmup_after_reset(foreach):
    lr, n = 0.01, 4
    p = torch.zeros(3, dtype=torch.float64, requires_grad=True)
    opt = AdamWSPAM([p], lr=lr, betas=(B1, B2), eps=EPS, weight_decay=0.0, clip=False,
                    interval=4, warmup_steps=n, foreach=foreach)
    grads = {1: [0.3, -0.1, 0.2], 2: [0.1, 0.4, -0.3], 3: [-0.2, 0.1, 0.5],
             4: [0.5, -2.0, 0.25], 5: [-0.4, 1.0, 0.75], 6: [0.1, 0.2, 0.3], 7: [1.0, -1.0, 0.5]}
    # scale(k) = 0.01 + 0.99 * 0.5 * (1 - cos(pi k / 4)), k = 1 on the reset step (4).
    expected_scale = {1: 1.0, 2: 1.0, 3: 1.0,       # no warmup before the first reset
                      4: 0.15498214331,             # k=1: 0.01 + 0.495 * (1 - 0.70710678)
                      5: 0.505,                     # k=2=N/2: 0.01 + 0.495 * 1
                      6: 0.85501785669,             # k=3: 0.01 + 0.495 * (1 + 0.70710678)
                      7: 1.0}                       # k=N: full update
    m, v, count = [0.0] * 3, [0.0] * 3, 0
    for step in range(1, 8):
        if step == 4:
            m, v, count = [0.0] * 3, [0.0] * 3, 0
        count += 1
        before = p.detach().clone()
        p.grad = torch.tensor(grads[step], dtype=torch.float64)
        opt.step()
        delta = p.detach() - before
        unscaled = []
        for i, g in enumerate(grads[step]):
            m[i] = B1 * m[i] + (1 - B1) * g
            v[i] = B2 * v[i] + (1 - B2) * g * g
            unscaled.append(adam_delta(m[i], v[i], count, lr))
        want = torch.tensor(unscaled, dtype=torch.float64) * expected_scale[step]
        torch.testing.assert_close(delta, want, rtol=1e-9, atol=0)
        if step == 4:  # fresh moments + restarted bias correction: -lr * sign(g) * 0.15498...
            torch.testing.assert_close(delta, torch.tensor([-1.5498214331e-3, 1.5498214331e-3,
                                                            -1.5498214331e-3], dtype=torch.float64),
                                       rtol=1e-6, atol=0)  # eps/|g| <= 4e-8
    assert opt.stats()["resets"] == 1


def test_state_dict_round_trip_resumes_identically():
    gen = torch.Generator().manual_seed(7)
    params = [torch.randn(6, 4, generator=gen).requires_grad_(),
              torch.randn(4, generator=gen).requires_grad_()]

    def make(ps):
        return AdamWSPAM([{"params": ps[:1], "names": ["w"]},
                          {"params": ps[1:], "names": ["b"], "weight_decay": 0.0}],
                         lr=1e-2, theta=3.0, interval=3, warmup_steps=4)

    grads = [[torch.randn(6, 4, generator=gen) * (1 + 20 * (i % 4 == 1)),
              torch.randn(4, generator=gen)] for i in range(12)]
    opt = make(params)

    def run(o, ps, steps):
        for i in steps:
            for p, g in zip(ps, grads[i]):
                p.grad = g.clone()
            o.step()

    run(opt, params, range(7))
    saved_params = [p.detach().clone() for p in params]
    buf = io.BytesIO()
    torch.save(opt.state_dict(), buf)
    mid_stats = opt.stats()
    assert mid_stats["resets"] == 2 and mid_stats["spikes_clipped"] > 0
    run(opt, params, range(7, 12))

    resumed = [t.clone().requires_grad_() for t in saved_params]
    opt2 = make(resumed)
    buf.seek(0)
    opt2.load_state_dict(torch.load(buf, weights_only=True))
    assert opt2.stats() == mid_stats
    run(opt2, resumed, range(7, 12))
    for a, b in zip(params, resumed):
        assert torch.equal(a, b)
        for key in ("exp_avg", "exp_avg_sq", "step"):
            assert torch.equal(opt.state[a][key], opt2.state[b][key])
    assert opt2.stats() == opt.stats()
    assert opt.stats()["resets"] == 4
    assert opt2.param_groups[1]["names"] == ["b"] and opt2.param_groups[1]["weight_decay"] == 0.0
    sd = copy.deepcopy(opt2.state_dict())
    assert sd["spam"]["global_step"] == 12


@pytest.mark.parametrize("kwargs, name", [
    ({"lr": 0.0}, "lr"), ({"lr": -1e-3}, "lr"),
    ({"betas": (1.0, 0.999)}, "betas"), ({"betas": (0.9, -0.1)}, "betas"),
    ({"eps": 0.0}, "eps"), ({"weight_decay": -0.1}, "weight_decay"),
    ({"theta": 0.0}, "theta"), ({"interval": -1}, "interval"),
    ({"warmup_steps": -5}, "warmup_steps"),
])
def test_invalid_arguments(kwargs, name):
    p = torch.zeros(2, requires_grad=True)
    with pytest.raises(ValueError, match=name):
        AdamWSPAM([p], **kwargs)
