"""AdamWSPAM's multi-tensor path against the per-parameter reference."""

from __future__ import annotations

import copy

import pytest
import torch

from lib.optim import spam_foreach
from lib.optim.spam import AdamWSPAM

SHAPES = [(24, 16), (16,), (3, 4, 5), (), (5, 7), (0,)]
LAGGING, UNSEEN = 2, 4  # parameter without a gradient on some steps; one with v == 0 rows


def make(params, foreach, eps=1e-8, spare_unseen=False):
    groups = [
        {"params": params[:3], "weight_decay": 0.1},
        {"params": params[3:], "weight_decay": 0.0},
    ]
    # theta 4.3 clips often (and, like 1 - lr * wd, is not exact in 16 bits); a reset
    # every 9 steps with a 4-step warmup; no clipping in the 2 calls from each reset.
    return AdamWSPAM(
        groups,
        lr=1e-2,
        betas=(0.9, 0.99),
        eps=eps,
        theta=4.3,
        interval=9,
        warmup_steps=4,
        clip_skip_steps=2,
        spare_unseen=spare_unseen,
        foreach=foreach,
    )


def gradients(steps, spike=30.0):
    """Per step, one gradient per SHAPES entry (None: no gradient that step)."""
    gen = torch.Generator().manual_seed(1)
    out = []
    for t in range(1, steps + 1):
        row = []
        for i, shape in enumerate(SHAPES):
            g = torch.randn(shape, generator=gen)
            g = g * (1 + spike * (torch.rand(shape, generator=gen) < 0.05))
            if i == UNSEEN:  # row 0 is zero for 3 calls from each reset, then a spike
                g[0] = 0.0 if t % 9 < 3 else 50 * g[0]
            row.append(None if i == LAGGING and t % 5 == 3 else g)
        out.append(row)
    return out


def train(foreach, dtypes, grads, eps=1e-8, opt=None, params=None, spare_unseen=False):
    if params is None:
        gen = torch.Generator().manual_seed(0)
        params = [
            torch.randn(s, generator=gen).to(d).requires_grad_() for s, d in zip(SHAPES, dtypes)
        ]
        opt = make(params, foreach, eps, spare_unseen)
    history = []
    for row in grads:
        for p, g in zip(params, row):
            p.grad = None if g is None else g.to(p.dtype)
        given = [None if p.grad is None else p.grad.clone() for p in params]
        opt.step()
        for p, g in zip(params, given):  # p.grad is read, never written
            assert (p.grad is None and g is None) or torch.equal(p.grad, g)
        history.append(opt.stats())
    return params, opt, history


def assert_same(params_a, opt_a, params_b, opt_b):
    for a, b in zip(params_a, params_b):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
        for key in ("exp_avg", "exp_avg_sq", "step"):
            torch.testing.assert_close(opt_a.state[a][key], opt_b.state[b][key], rtol=0, atol=0)


MIXED = [torch.float32, torch.bfloat16, torch.float32, torch.float64, torch.bfloat16, torch.float32]


@pytest.mark.parametrize(
    "dtypes, spare_unseen",
    [
        ([torch.float32] * 6, False),
        ([torch.float64] * 6, False),
        ([torch.bfloat16] * 6, False),
        ([torch.float16] * 6, False),
        (MIXED, False),
        ([torch.float32] * 6, True),
        (MIXED, True),
    ],
    ids=["fp32", "fp64", "bf16", "fp16", "mixed", "fp32-spare", "mixed-spare"],
)
def test_foreach_matches_per_parameter_path_exactly(dtypes, spare_unseen):
    half = torch.float16 in dtypes
    grads = gradients(50, spike=5.0 if half else 30.0)  # fp16: keep g^2 finite
    eps = 1e-4 if half else 1e-8  # 1e-8 is 0 in fp16
    a, opt_a, hist_a = train(True, dtypes, grads, eps, spare_unseen=spare_unseen)
    b, opt_b, hist_b = train(False, dtypes, grads, eps, spare_unseen=spare_unseen)
    assert opt_a.uses_foreach() and not opt_b.uses_foreach()
    assert_same(a, opt_a, b, opt_b)  # on CPU both paths run the same kernels: to the bit
    assert hist_a == hist_b  # spike and reset counts, step by step
    assert hist_a[-1]["resets"] == 5 and hist_a[-1]["spikes_clipped"] > 100
    # The lagging parameter missed 10 of the 50 calls, so from call 4 on the group
    # ran two buckets with different bias corrections.
    assert float(opt_a.state[a[LAGGING]]["step"]) == 40.0
    assert float(opt_a.state[a[0]]["step"]) == 50.0


@pytest.mark.parametrize("foreach", [True, False])
@pytest.mark.parametrize("spare_unseen", [False, True], ids=["authors", "spare"])
def test_entries_with_zero_second_moment(foreach, spare_unseen):
    b1, b2, theta = 0.9, 0.999, 5000.0
    p = torch.zeros(3, requires_grad=True)
    opt = AdamWSPAM(
        [p],
        lr=1e-3,
        betas=(b1, b2),
        weight_decay=0.0,
        theta=theta,
        reset=False,
        clip_skip_steps=2,
        spare_unseen=spare_unseen,
        foreach=foreach,
    )
    p.grad = torch.tensor([1.0, 0.0, 1.0])  # entry 1 keeps v == 0
    opt.step()
    v_prev = float(opt.state[p]["exp_avg_sq"][2])
    p.grad = torch.tensor([1.0, 1e6, 1e6])
    opt.step()
    m = opt.state[p]["exp_avg"]
    # The authors' code clips entry 1 to sign(g) sqrt(theta * 0) = 0; spare_unseen keeps it.
    assert opt.stats()["spikes_clipped"] == (1 if spare_unseen else 2)
    want_m1 = 1e5 if spare_unseen else 0.0  # (1 - b1) * 1e6
    torch.testing.assert_close(m[1], torch.tensor(want_m1), rtol=1e-6, atol=0)
    clipped = (theta * v_prev) ** 0.5  # entry 2: sqrt(theta * v_prev) = sqrt(5000 * 1e-3)
    want = b1 * 0.1 + (1 - b1) * clipped  # m was 0.1
    torch.testing.assert_close(m[2], torch.tensor(want), rtol=1e-6, atol=0)


def test_clip_count_is_exact_across_count_pieces(monkeypatch):
    monkeypatch.setattr(spam_foreach, "COUNT_PIECE", 7)  # tensors are counted in pieces of 7
    grads = gradients(20)
    a, opt_a, hist_a = train(True, [torch.float32] * 6, grads)
    b, opt_b, hist_b = train(False, [torch.float32] * 6, grads)
    assert hist_a == hist_b and hist_a[-1]["spikes_clipped"] > 100


def test_checkpoints_move_between_paths():
    grads = gradients(30)
    a, opt_a, _ = train(True, [torch.float32] * 6, grads[:17])
    b, opt_b, _ = train(False, [torch.float32] * 6, grads[:17])
    sd_a, sd_b = opt_a.state_dict(), opt_b.state_dict()
    assert sd_a["spam"] == sd_b["spam"]
    assert [sorted(g) for g in sd_a["param_groups"]] == [sorted(g) for g in sd_b["param_groups"]]
    assert all(sorted(sd_a["state"][k]) == sorted(sd_b["state"][k]) for k in sd_b["state"])
    # Resume the foreach run's checkpoint on the per-parameter path, and vice versa.
    a2 = [p.detach().clone().requires_grad_() for p in a]
    b2 = [p.detach().clone().requires_grad_() for p in b]
    opt_a2, opt_b2 = make(a2, foreach=False), make(b2, foreach=True)
    opt_a2.load_state_dict(copy.deepcopy(sd_a))
    opt_b2.load_state_dict(copy.deepcopy(sd_b))
    for params, opt in ((a, opt_a), (b, opt_b), (a2, opt_a2), (b2, opt_b2)):
        train(None, None, grads[17:], opt=opt, params=params)
    assert_same(a, opt_a, a2, opt_a2)
    assert_same(b, opt_b, b2, opt_b2)
    assert opt_a2.stats() == opt_a.stats() == opt_b2.stats()


def test_default_path_is_foreach_on_one_device_type():
    p = torch.zeros(2, requires_grad=True)
    assert AdamWSPAM([p]).uses_foreach()
    assert not AdamWSPAM([p], foreach=False).uses_foreach()
    q = torch.zeros(2, device="meta", requires_grad=True)
    assert not AdamWSPAM([p, q]).uses_foreach()  # two device types: per parameter
    assert AdamWSPAM([p, q], foreach=True).uses_foreach()


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_foreach_matches_per_parameter_path_on_cuda():
    grads = [[None if g is None else g.cuda() for g in row] for row in gradients(40)]
    results = []
    for foreach in (True, False):
        gen = torch.Generator().manual_seed(0)
        params = [torch.randn(s, generator=gen).cuda().requires_grad_() for s in SHAPES]
        results.append(train(foreach, None, grads, opt=make(params, foreach), params=params))
    (a, opt_a, hist_a), (b, opt_b, hist_b) = results
    for x, y in zip(a, b):  # CUDA's multi-tensor kernels may round differently
        torch.testing.assert_close(x, y, rtol=1e-5, atol=1e-6)
    assert hist_a[-1]["resets"] == hist_b[-1]["resets"] == 4
    assert abs(hist_a[-1]["spikes_clipped"] - hist_b[-1]["spikes_clipped"]) <= 2
