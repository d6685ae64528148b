"""AdamWSPAM's one-pass step (OPTIMIZER_IMPL=fused) against a transcription of the rule."""

from __future__ import annotations

import functools
import math

import pytest
import torch

from lib.optim import spam_fused
from lib.optim.spam import AdamWSPAM
from tests.lib.optim.test_optim_spam_foreach import LAGGING, SHAPES, gradients, make, train

HYPER = dict(lr=1e-2, betas=(0.9, 0.99), eps=1e-8, theta=50.0, interval=6, warmup=3, skip=2)
WD = (0.1, 0.0)  # the two groups' weight decay
STEPS, SPIKE_CALL = 14, 4  # resets at calls 6 and 12; call 4's gradient is a spike


def transcription(weights, grads, dtype, groups, theta=None):
    """spam.py's per-parameter rule (module doc, items 1-6) written out, out of place.

    Returns (weights after every call, entries clipped, resets).
    """
    lr, (b1, b2), eps = HYPER["lr"], HYPER["betas"], HYPER["eps"]
    interval, n, skip = HYPER["interval"], HYPER["warmup"], HYPER["skip"]
    theta = HYPER["theta"] if theta is None else theta
    w = [x.clone().to(dtype) for x in weights]
    m = [torch.zeros_like(x) for x in w]
    v = [torch.zeros_like(x) for x in w]
    t, j, clipped, resets, history = 0, n + 1, 0, 0, []
    for k, row in enumerate(grads, start=1):
        if k % interval == 0:  # 1. reset
            m, v, resets = (
                [torch.zeros_like(x) for x in w],
                [torch.zeros_like(x) for x in w],
                resets + 1,
            )
        clip = k >= skip and k % interval >= skip  # 2. outside the no-clipping windows
        s = 1.0 if j >= n else 1 - 0.99 * (1 + math.cos(math.pi * j / (n + 1))) / 2  # 5.
        t += 1
        for i, g in enumerate(row):
            g = g.to(dtype)
            if clip:
                limit = torch.sqrt(theta * v[i])
                spike = g.abs() > limit
                clipped += int(spike.sum())
                g = torch.where(spike, torch.copysign(limit, g), g)
            m[i] = b1 * m[i] + (1 - b1) * g  # 3.
            v[i] = b2 * v[i] + (1 - b2) * g * g
            size = lr * s * math.sqrt(1 - b2**t) / (1 - b1**t)  # 4.
            w[i] = w[i] - size * m[i] / (torch.sqrt(v[i]) + eps)
            w[i] = w[i] * (1 - lr * groups[i])  # 6. decay after the update
        j += 1
        if (k + 1) % interval == 0:
            j = 0
        history.append([x.clone() for x in w])
    return history, clipped, resets


def case():
    gen = torch.Generator().manual_seed(3)
    shapes = [(6, 5), (7,), (2, 3, 4)]
    weights = [torch.randn(s, generator=gen, dtype=torch.float64) for s in shapes]
    grads = []
    for k in range(1, STEPS + 1):
        row = [torch.randn(s, generator=gen, dtype=torch.float64) for s in shapes]
        if k == SPIKE_CALL:
            row[0] = row[0] * 1e3
        grads.append(row)
    return weights, grads, [WD[0], WD[0], WD[1]]


def run_fused(weights, grads, dtype, groups):
    params = [x.clone().to(dtype).requires_grad_() for x in weights]
    opt = AdamWSPAM(
        [
            {"params": params[:2], "weight_decay": groups[0]},
            {"params": params[2:], "weight_decay": groups[2]},
        ],
        lr=HYPER["lr"],
        betas=HYPER["betas"],
        eps=HYPER["eps"],
        theta=HYPER["theta"],
        interval=HYPER["interval"],
        warmup_steps=HYPER["warmup"],
        clip_skip_steps=HYPER["skip"],
        fused=True,
    )
    history = []
    for row in grads:
        for p, g in zip(params, row):
            p.grad = g.to(dtype)
        opt.step()
        history.append([p.detach().clone() for p in params])
    return history, opt


def eager_math(spare_unseen, amsgrad=False):
    """The one-pass step's operations without compiling them (same scalars, same order)."""
    return functools.partial(spam_fused.spam_math, spare_unseen=spare_unseen, amsgrad=amsgrad)


TOLERANCE = {torch.float32: dict(rtol=1e-5, atol=1e-6), torch.float64: dict(rtol=1e-12, atol=1e-14)}


def check_against_transcription(dtype):
    weights, grads, groups = case()
    want, clipped, resets = transcription(weights, grads, dtype, groups)
    got, opt = run_fused(weights, grads, dtype, groups)
    assert opt.impl == "fused (compiled)", opt.fused_error
    assert opt.stats() == {"spikes_clipped": clipped, "resets": resets}
    assert resets == 2 and clipped > 0
    for k, (a, b) in enumerate(zip(got, want), start=1):
        for x, y in zip(a, b):
            torch.testing.assert_close(x, y, **TOLERANCE[dtype], msg=f"call {k}")
    # the clipping changes the trajectory: a step without it would fail above
    unclipped, _, _ = transcription(weights, grads, dtype, groups, theta=math.inf)
    assert (unclipped[-1][0] - want[-1][0]).abs().max() > 1e-3


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_one_pass_rule_matches_the_transcription(monkeypatch, dtype):
    """The step's operations and scalars, run eagerly: several calls, a spike, two resets."""
    monkeypatch.setattr(spam_fused, "compiled_math", eager_math)
    check_against_transcription(dtype)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_compiled_one_pass_matches_the_transcription(dtype):
    torch._dynamo.reset()  # graphs compiled by earlier tests count towards dynamo's limit of 8
    check_against_transcription(dtype)


def test_device_scalars_are_refilled_not_recreated(monkeypatch):
    """One scalar per group and role, whatever the number of calls (nothing grows)."""
    monkeypatch.setattr(spam_fused, "compiled_math", eager_math)
    weights, grads, groups = case()
    _, opt = run_fused(weights, grads, torch.float32, groups)
    held = opt._fused_steps._scalars
    # per group: theta with and without clipping, the step value, the decay factor
    assert len(held) == 2 * 4
    values = {
        key[0][1:]: value
        for key, (value, _) in held.items()
        if key[0][0] == id(opt.param_groups[0])
    }
    assert values[("decay",)] == pytest.approx(1 - HYPER["lr"] * WD[0])
    assert values[("theta", False)] == math.inf and values[("theta", True)] == HYPER["theta"]


def fused_train(grads, spare_unseen=False):
    gen = torch.Generator().manual_seed(0)
    params = [torch.randn(s, generator=gen).requires_grad_() for s in SHAPES]
    opt = make(params, foreach=None, spare_unseen=spare_unseen)
    opt.fused = True
    return train(None, None, grads, opt=opt, params=params)


def ulps(a, b):
    return int((a.view(torch.int32).long() - b.view(torch.int32).long()).abs().max())


@pytest.mark.slow
def test_compiled_step_matches_the_per_parameter_path():
    """40 calls: clipping from call 2, resets at 9, 18, 27, 36 (2 calls unclipped after
    each, warmup 4), a parameter without gradients on some calls (two buckets)."""
    torch._dynamo.reset()
    grads = gradients(40)
    one_a, one_opt_a, _ = fused_train(grads[:1])
    one_b, one_opt_b, _ = train(False, [torch.float32] * 6, grads[:1])
    assert one_opt_a.impl == "fused (compiled)", one_opt_a.fused_error
    for a, b in zip(one_a, one_b):  # one step: the same value or 1 ulp (a scalar tail's fma)
        if a.numel():
            assert ulps(a.detach(), b.detach()) <= 1
            assert ulps(one_opt_a.state[a]["exp_avg"], one_opt_b.state[b]["exp_avg"]) == 0
            assert ulps(one_opt_a.state[a]["exp_avg_sq"], one_opt_b.state[b]["exp_avg_sq"]) == 0
    a, opt_a, hist_a = fused_train(grads)
    b, opt_b, hist_b = train(False, [torch.float32] * 6, grads)
    assert opt_a.impl == "fused (compiled)" and opt_a.fused_error is None
    assert hist_a == hist_b  # every call's clip and reset counts, exactly
    assert hist_a[-1]["resets"] == 4 and hist_a[-1]["spikes_clipped"] > 100
    for pa, pb in zip(a, b):  # 1-ulp differences compound over 40 steps, no further
        torch.testing.assert_close(pa, pb, rtol=2e-6, atol=1e-7)
        for key in ("exp_avg", "exp_avg_sq"):
            torch.testing.assert_close(
                opt_a.state[pa][key], opt_b.state[pb][key], rtol=2e-5, atol=1e-7
            )
        assert float(opt_a.state[pa]["step"]) == float(opt_b.state[pb]["step"])
    assert float(opt_a.state[a[LAGGING]]["step"]) == 32.0


def test_a_failing_compile_falls_back_to_the_multi_tensor_step(monkeypatch):
    def broken(spare_unseen, amsgrad=False):
        def fail(*args):
            raise RuntimeError("no C++ compiler (simulated)")

        return fail

    monkeypatch.setattr(spam_fused, "compiled_math", broken)
    grads = gradients(12)
    a, opt_a, hist_a = fused_train(grads)
    b, opt_b, hist_b = train(True, [torch.float32] * 6, grads)
    assert not opt_a.fused and "no C++ compiler" in opt_a.fused_error
    assert opt_a.impl.startswith("foreach (compile failed")
    assert hist_a == hist_b
    for pa, pb in zip(a, b):  # the failed call changed nothing before the fallback ran
        torch.testing.assert_close(pa, pb, rtol=0, atol=0)
        torch.testing.assert_close(
            opt_a.state[pa]["exp_avg_sq"], opt_b.state[pb]["exp_avg_sq"], rtol=0, atol=0
        )
