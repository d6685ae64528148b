"""ADAM_AMSGRAD and SPAM_SPIKE_RESET (knlp's AdamWSPAM options): the spike test
against a transcription of knlp's rule, AdamWSPAM with both against a float64
transcription through clipping, a reset and a spike, AdamW and AdamWSPAM's
AMSGrad against torch.optim.AdamW(amsgrad=True), and the Kconfig wiring."""

from __future__ import annotations

import math
import random
import statistics

import pytest
import torch

from lib.estimate.memory import model_counts, optimizer_bytes
from lib.optim import build_optimizer, optimizer_stats, state_bytes
from lib.optim.spam import AdamWSPAM
from lib.optim.spike import SpikeDetector, grad_norm
from tests.lib.optim.spam_paths import PATHS, check_path, path_options


def knlp_spikes(norms: list[float], threshold: float = 2.0) -> list[bool]:
    """knlp 041ec5f2 lib/optimizers.py apply_spam_gradient_processing, restated:
    finite norms go into a 100-long window; from 10 on, the newest is a spike when
    its z-score against the rest of the window (population std) exceeds threshold."""
    window: list[float] = []
    out = []
    for x in norms:
        if not math.isfinite(x):
            out.append(False)
            continue
        window = (window + [x])[-100:]
        if len(window) < 10:
            out.append(False)
            continue
        rest = window[:-1]
        mean, std = statistics.fmean(rest), statistics.pstdev(rest)
        out.append(std > 0 and (x - mean) / std > threshold)
    return out


def test_spike_test_follows_knlps_rule():
    rnd = random.Random(3)
    norms = [1 + 0.1 * rnd.random() for _ in range(250)]
    for i, factor in ((5, 9.0), (40, 3.0), (150, 1.25), (200, 1.5)):
        norms[i] *= factor
    norms[60] = float("nan")
    norms[61] = float("inf")
    detector = SpikeDetector(2.0)
    got = [detector.observe(x) for x in norms]
    assert got == knlp_spikes(norms)
    # 5: fewer than 10 norms; 40: 3x, but the 9x of call 5 is still in the window;
    # 150: 1.25x once both left it; non-finite norms are neither kept nor spikes
    assert [i for i, spike in enumerate(got) if spike] == [150, 200]
    assert len(detector.norms) == 100
    strict = SpikeDetector(10.0)
    assert [strict.observe(x) for x in norms] == knlp_spikes(norms, 10.0) != got
    steady = [1.0, 1.1] * 4 + [1.0]
    for at, spike in ((8, False), (9, True)):  # the 10th kept norm is the first tested
        detector = SpikeDetector(2.0)
        assert [detector.observe(x) for x in steady[:at] + [5.0]][-1] is spike


def test_gradient_norm_is_the_global_two_norm():
    a, b, c = torch.zeros(3, requires_grad=True), torch.zeros(2, 2), torch.zeros(1)
    a.grad, b.grad = torch.tensor([3.0, 0.0, 4.0]), torch.full((2, 2), 6.0)
    assert grad_norm([a, b, c]) == pytest.approx(math.sqrt(25 + 144), rel=1e-15)


# A noisy quadratic in two tensors; SPIKES multiply the whole gradient at a call so
# the global norm spikes, and one entry of call 31 is large enough to be clipped.
SHAPES, STEPS, INTERVAL, WARMUP, SKIP = ((3, 4), (5,)), 60, 25, 4, 3
LR, BETAS, EPS, THETA, WD = 5e-2, (0.9, 0.999), 1e-6, 50.0, (0.1, 0.0)
SPIKES = {20: 30.0, 31: 8.0, 52: 40.0}


def problem():
    rnd = random.Random(1)
    sizes = [math.prod(s) for s in SHAPES]
    init = [[rnd.uniform(-1, 1) for _ in range(n)] for n in sizes]
    curv = [[rnd.uniform(0.5, 2) for _ in range(n)] for n in sizes]
    noise = [[[rnd.gauss(0, 0.2) for _ in range(n)] for n in sizes] for _ in range(STEPS)]
    return init, curv, noise


INIT, CURV, NOISE = problem()


def gradient(k, x):
    g = [[c * xi + n for xi, c, n in zip(xs, cs, ns)] for xs, cs, ns in zip(x, CURV, NOISE[k - 1])]
    g = [[gi * SPIKES.get(k, 1.0) for gi in gs] for gs in g]
    if k == 31:
        g[0][2] *= 50.0
    return g


def transcription(amsgrad: bool, spike_reset: bool):
    """Parameters after each call, and the calls that damped, in float64: the rule of
    lib/optim/spam.py's docstring with knlp's AMSGrad and spike damping."""
    b1, b2 = BETAS
    x = [list(xs) for xs in INIT]
    m = [[0.0] * len(xs) for xs in x]
    v = [[0.0] * len(xs) for xs in x]
    vmax = [[0.0] * len(xs) for xs in x]
    j, norms, damped, out = WARMUP + 1, [], [], []
    for k in range(1, STEPS + 1):
        g = gradient(k, x)
        norms.append(math.sqrt(sum(gi * gi for gs in g for gi in gs)))
        damp = spike_reset and knlp_spikes(norms)[-1]
        if damp:
            damped.append(k)
        if k % INTERVAL == 0:  # the periodic reset: m and v, not the maximum
            m = [[0.0] * len(xs) for xs in x]
            v = [[0.0] * len(xs) for xs in x]
        clip = k >= SKIP and k % INTERVAL >= SKIP
        s = 1.0 if j >= WARMUP else 1 - 0.99 * (1 + math.cos(math.pi * j / (WARMUP + 1))) / 2
        size = LR * math.sqrt(1 - b2**k) / (1 - b1**k)
        for t in range(len(x)):
            for i in range(len(x[t])):
                gi = g[t][i]
                lim = math.sqrt(THETA * v[t][i])
                if clip and abs(gi) > lim:
                    gi = math.copysign(lim, gi)
                if damp:  # after clipping against the undamped v
                    m[t][i] *= 0.5
                    v[t][i] *= 0.9
                m[t][i] = b1 * m[t][i] + (1 - b1) * gi
                v[t][i] = b2 * v[t][i] + (1 - b2) * gi * gi
                vmax[t][i] = max(vmax[t][i], v[t][i])
                denom = math.sqrt(vmax[t][i] if amsgrad else v[t][i]) + EPS
                x[t][i] -= size * s * m[t][i] / denom
                x[t][i] *= 1 - LR * WD[t]
        j = 0 if (k + 1) % INTERVAL == 0 else j + 1
        out.append([xi for xs in x for xi in xs])
    return out, damped


def run_spam(amsgrad: bool, spike_reset: bool, foreach: bool | None, fused: bool = False):
    params = [
        torch.tensor(xs, dtype=torch.float32).reshape(s).requires_grad_()
        for xs, s in zip(INIT, SHAPES)
    ]
    opt = AdamWSPAM(
        [{"params": [p], "weight_decay": wd} for p, wd in zip(params, WD)],
        lr=LR,
        betas=BETAS,
        eps=EPS,
        theta=THETA,
        interval=INTERVAL,
        warmup_steps=WARMUP,
        clip_skip_steps=SKIP,
        amsgrad=amsgrad,
        spike_reset=spike_reset,
        foreach=foreach,
        fused=fused,
    )
    out = []
    for k in range(1, STEPS + 1):
        g = gradient(k, [p.detach().double().reshape(-1).tolist() for p in params])
        for p, gs in zip(params, g):
            p.grad = torch.tensor(gs, dtype=torch.float32).reshape(p.shape)
        opt.step()
        out.append(torch.cat([p.detach().reshape(-1) for p in params]).double())
    return out, opt


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("amsgrad,spike_reset", [(True, True), (True, False), (False, True)])
def test_spam_with_amsgrad_and_spike_damping_follows_the_formula(
    path, amsgrad, spike_reset, monkeypatch
):
    want, damped = transcription(amsgrad, spike_reset)
    options = path_options(path, monkeypatch)
    got, opt = run_spam(amsgrad, spike_reset, options.get("foreach"), options.get("fused", False))
    check_path(opt, path)
    for k, (w, g) in enumerate(zip(want, got), start=1):
        torch.testing.assert_close(
            g, torch.tensor(w, dtype=torch.float64), rtol=2e-5, atol=2e-6, msg=f"call {k}"
        )
    stats = optimizer_stats(opt)
    assert stats["resets"] == 2 and stats["spikes_clipped"] > 0
    if spike_reset:
        assert damped == [20, 31, 52] and stats["spike_resets"] == 3
    else:
        assert "spike_resets" not in stats
    # the options change the trajectory: the test would catch a missing one
    other, _ = transcription(not amsgrad, spike_reset)
    assert max(abs(a - b) for a, b in zip(other[-1], want[-1])) > 1e-3
    if spike_reset:
        plain, _ = transcription(amsgrad, False)
        assert max(abs(a - b) for a, b in zip(plain[-1], want[-1])) > 1e-3


def test_loop_and_multi_tensor_paths_agree_to_the_bit():
    (loop, opt_a), (multi, opt_b) = run_spam(True, True, False), run_spam(True, True, True)
    assert all(torch.equal(a, b) for a, b in zip(loop, multi))
    for a, b in zip(opt_a.state.values(), opt_b.state.values()):
        for key in ("exp_avg", "exp_avg_sq", "max_exp_avg_sq"):
            assert torch.equal(a[key], b[key])


@pytest.mark.slow
def test_compiled_path_with_amsgrad_and_damping_matches_the_loop():
    """The compiled step divides by the maximum too; damping calls take the eager path."""
    torch._dynamo.reset()  # graphs compiled by earlier tests count towards dynamo's limit of 8
    fused, opt = run_spam(True, True, foreach=None, fused=True)
    loop, ref = run_spam(True, True, foreach=False)
    assert opt.impl == "fused (compiled)", opt.fused_error
    assert opt.stats() == ref.stats() and opt.stats()["spike_resets"] == 3
    for k, (a, b) in enumerate(zip(fused, loop), start=1):
        torch.testing.assert_close(a, b, rtol=2e-5, atol=1e-6, msg=f"call {k}")


@pytest.mark.parametrize("foreach", [False, True])
def test_amsgrad_maximum_survives_a_reset(foreach):
    w = torch.zeros(2, requires_grad=True)
    opt = AdamWSPAM(
        [w], lr=1e-2, clip=False, interval=3, warmup_steps=0, amsgrad=True, foreach=foreach
    )
    for g in (10.0, 10.0, 0.1):  # call 3 zeroes m and v first
        w.grad = torch.full((2,), g)
        if g == 0.1:
            v2 = opt.state[w]["exp_avg_sq"].clone()
        opt.step()
    state = opt.state[w]
    torch.testing.assert_close(state["exp_avg_sq"], torch.full((2,), 0.001 * 0.01))
    assert torch.equal(state["max_exp_avg_sq"], v2) and float(v2[0]) > 0.1


def test_spike_state_round_trip_resumes_identically():
    _, whole = run_spam(True, True, foreach=True)
    params = [
        torch.tensor(xs, dtype=torch.float32).reshape(s).requires_grad_()
        for xs, s in zip(INIT, SHAPES)
    ]
    opt = AdamWSPAM(params, lr=LR, spike_reset=True, amsgrad=True, interval=INTERVAL)
    for _ in range(15):
        for p in params:
            p.grad = torch.ones_like(p)
        opt.step()
    saved = opt.state_dict()
    assert len(saved["spam"]["spike_norms"]) == 15
    again = AdamWSPAM(
        [p.detach().clone().requires_grad_() for p in params],
        lr=LR,
        spike_reset=True,
        amsgrad=True,
        interval=INTERVAL,
    )
    again.load_state_dict(saved)
    assert list(again.spike.norms) == list(opt.spike.norms)
    assert again.stats() == opt.stats() and "spike_resets" in again.stats()
    assert whole.stats()["spike_resets"] == 3


def test_spam_amsgrad_matches_torch_adamw_amsgrad_without_its_own_features():
    """No clipping, reset or decay and a negligible eps: AdamWSPAM with AMSGrad is Adam
    with AMSGrad, so torch's AdamW(amsgrad=True) takes the same steps."""
    gen = torch.Generator().manual_seed(5)
    a = [
        torch.randn(4, 3, generator=gen).requires_grad_(),
        torch.randn(6, generator=gen).requires_grad_(),
    ]
    b = [t.detach().clone().requires_grad_() for t in a]
    betas = (0.9, 0.9)  # v forgets the large early gradients quickly; the maximum does not
    ours = AdamWSPAM(
        a, lr=1e-2, betas=betas, eps=1e-12, clip=False, reset=False, warmup_steps=0, amsgrad=True
    )
    ref = torch.optim.AdamW(
        b, lr=1e-2, betas=betas, eps=1e-12, weight_decay=0.0, amsgrad=True, foreach=False
    )
    plain = AdamWSPAM(
        [t.detach().clone().requires_grad_() for t in a],
        lr=1e-2,
        betas=betas,
        eps=1e-12,
        clip=False,
        reset=False,
        warmup_steps=0,
    )
    for k in range(30):
        scale = 20.0 if k < 3 else 1.0
        gs = [torch.randn(t.shape, generator=gen) * scale for t in a]
        for opt, ps in ((ours, a), (ref, b), (plain, plain.param_groups[0]["params"])):
            for p, g in zip(ps, gs):
                p.grad = g.clone()
            opt.step()
    for pa, pb in zip(a, b):
        torch.testing.assert_close(pa, pb, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(
            ours.state[pa]["max_exp_avg_sq"], ref.state[pb]["max_exp_avg_sq"]
        )
    assert (a[0] - plain.param_groups[0]["params"][0]).abs().max() > 1e-3


def test_adamw_amsgrad_is_torchs_and_the_symbols_reach_the_optimizers(tiny_run):
    from lib.train.naming import create_run_dir
    from lib.train.trainer import Trainer

    run = tiny_run(ADAM_AMSGRAD="y", RUN_NAME="ams")
    trainer = Trainer(run, create_run_dir(run), log=lambda _: None)
    model = trainer.training.model
    opt = build_optimizer(run.optim, run.LEARNING_RATE, model, torch.device("cpu"))
    assert isinstance(opt, torch.optim.AdamW) and opt.defaults["amsgrad"]
    ref = torch.optim.AdamW(
        model.param_groups(run.WEIGHT_DECAY),
        lr=run.LEARNING_RATE,
        betas=(run.ADAM_BETA1, run.ADAM_BETA2),
        eps=run.ADAM_EPSILON,
        amsgrad=True,
        foreach=False,
    )
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    gen = torch.Generator().manual_seed(0)
    steps = []
    for k in range(4):
        for p in model.parameters():
            p.grad = torch.randn(p.shape, generator=gen) * (10.0 if k == 0 else 1.0)
        opt.step()
        steps.append({n: p.detach().clone() for n, p in model.named_parameters()})
    with torch.no_grad():
        for n, p in model.named_parameters():
            p.copy_(before[n])
    for p in model.parameters():
        ref.state.pop(p, None)
    gen = torch.Generator().manual_seed(0)
    for k in range(4):
        for p in model.parameters():
            p.grad = torch.randn(p.shape, generator=gen) * (10.0 if k == 0 else 1.0)
        ref.step()
        for n, p in model.named_parameters():
            torch.testing.assert_close(p, steps[k][n], rtol=1e-5, atol=1e-7)
    counts = model_counts(run, trainer.meta["vocab_size"])[1]
    # three fp32 buffers per weight and a step count per tensor; `make estimate` agrees
    assert state_bytes(opt) == 12 * counts.params + 4 * counts.tensors
    assert optimizer_bytes(run, counts) == state_bytes(opt)

    spam = tiny_run(
        OPTIMIZER_ADAMWSPAM="y",
        ADAM_AMSGRAD="y",
        SPAM_SPIKE_RESET="y",
        SPAM_SPIKE_THRESHOLD="3.5",
        RUN_NAME="spam",
    )
    opt = build_optimizer(spam.optim, spam.LEARNING_RATE, model, torch.device("cpu"))
    assert isinstance(opt, AdamWSPAM) and opt.param_groups[0]["amsgrad"]
    assert opt.spike is not None and opt.spike.threshold == 3.5
    prune = tiny_run(OPTIMIZER_ADAMWPRUNE="y", ADAM_AMSGRAD="y", RUN_NAME="prune")
    pruned = build_optimizer(prune.optim, prune.LEARNING_RATE, model, torch.device("cpu"))
    assert pruned.defaults["amsgrad"]
    off_run = tiny_run(OPTIMIZER_ADAMWSPAM="y", RUN_NAME="off")
    off = build_optimizer(off_run.optim, off_run.LEARNING_RATE, model, torch.device("cpu"))
    assert not off.param_groups[0]["amsgrad"] and off.spike is None
