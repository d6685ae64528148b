"""AdamWSPAM against an independent float64 transcription of the SPAM authors'
algorithm (TianjinYellow/SPAM-Optimizer at e8185fb, galore_torch/SPAM.py: the
numbered points of lib/optim/spam.py's docstring), step by step through two resets.
The one transcription every code path (loop, foreach, fused) is checked against."""

from __future__ import annotations

import math
import random

import pytest
import torch

from lib.optim.spam import AdamWSPAM
from tests.lib.optim.spam_paths import (  # PATHS: "compiled" is pytest.mark.slow
    PATHS,
    check_path,
    path_options,
)

STEPS, INTERVAL, WARMUP, SKIP = 1200, 500, 150, 20  # resets at calls 500 and 1000
LR, BETAS, EPS, THETA = 1e-2, (0.9, 0.999), 1e-6, 5000.0  # the authors' defaults
DECAY = (0.1, 0.0)  # per tensor: a decayed matrix, an undecayed vector
SHAPES = ((3, 4), (4,))
# (call, tensor, entry): a gradient 1000x its usual size. Calls 5, 505, 519 and 1003
# lie in the no-clipping windows (1-19, 500-519, 1000-1019); the others are clipped.
SPIKES = (
    (5, 0, 1),
    (20, 1, 2),
    (100, 0, 7),
    (505, 0, 3),
    (519, 1, 0),
    (520, 0, 0),
    (750, 1, 3),
    (1003, 0, 11),
    (1020, 0, 5),
    (1150, 1, 1),
)
INSIDE_WINDOWS = {5, 505, 519, 1003}


def problem():
    """Initial values, curvatures, targets and a fixed noise table (all flat lists)."""
    rnd = random.Random(0)
    sizes = [math.prod(s) for s in SHAPES]
    init = [[rnd.uniform(-2, 2) for _ in range(n)] for n in sizes]
    curv = [[rnd.uniform(0.5, 3) for _ in range(n)] for n in sizes]
    target = [[rnd.uniform(-1, 1) for _ in range(n)] for n in sizes]
    noise = [[[rnd.gauss(0, 0.3) for _ in range(n)] for n in sizes] for _ in range(STEPS)]
    return init, curv, target, noise


INIT, CURV, TARGET, NOISE = problem()


def gradient(k: int, x: list[list[float]]) -> list[list[float]]:
    """Gradient of a noisy quadratic at call k, spikes injected."""
    g = [
        [c * (xi - t) + n for xi, c, t, n in zip(xs, cs, ts, ns)]
        for xs, cs, ts, ns in zip(x, CURV, TARGET, NOISE[k - 1])
    ]
    for call, tensor, entry in SPIKES:
        if call == k:
            g[tensor][entry] *= 1000.0
    return g


def transcription(restart: bool = False) -> tuple[list[list[float]], list[int]]:
    """Parameters after every call (flat) and entries clipped at every call."""
    b1, b2 = BETAS
    x = [list(xs) for xs in INIT]
    m = [[0.0] * len(xs) for xs in x]
    v = [[0.0] * len(xs) for xs in x]
    t = [0] * len(x)
    j = WARMUP + 1  # no warmup before the first reset
    trajectory, clipped = [], []
    for k in range(1, STEPS + 1):
        g = gradient(k, x)
        if k % INTERVAL == 0:  # 1. reset m and v (t goes on unless restart)
            m = [[0.0] * len(xs) for xs in x]
            v = [[0.0] * len(xs) for xs in x]
            if restart:
                t = [0] * len(x)
        s = 1 - 0.99 * (1 + math.cos(math.pi * j / (WARMUP + 1))) / 2 if j < WARMUP else 1.0
        clip = k >= SKIP and k % INTERVAL >= SKIP  # 2. the windows
        count = 0
        for i in range(len(x)):
            t[i] += 1
            size = LR * s * math.sqrt(1 - b2 ** t[i]) / (1 - b1 ** t[i])  # 4.
            for e in range(len(x[i])):
                ge = g[i][e]
                if clip and ge * ge > THETA * v[i][e]:
                    ge = math.copysign(math.sqrt(THETA * v[i][e]), ge)
                    count += 1
                m[i][e] = b1 * m[i][e] + (1 - b1) * ge  # 3.
                v[i][e] = b2 * v[i][e] + (1 - b2) * ge * ge
                x[i][e] -= size * m[i][e] / (math.sqrt(v[i][e]) + EPS)
                x[i][e] -= LR * DECAY[i] * x[i][e]  # 6. after the update, not scaled by s
        j += 1  # 5. the warmup counter restarts at the end of the call before a reset
        if (k + 1) % INTERVAL == 0:
            j = 0
        trajectory.append([xe for xs in x for xe in xs])
        clipped.append(count)
    return trajectory, clipped


def ours(**options) -> tuple[list[list[float]], list[int], AdamWSPAM]:
    params = [
        torch.tensor(xs, dtype=torch.float64).reshape(s).requires_grad_()
        for xs, s in zip(INIT, SHAPES)
    ]
    opt = AdamWSPAM(
        [{"params": [p], "weight_decay": wd} for p, wd in zip(params, DECAY)],
        lr=LR,
        **options,
    )  # everything else: the defaults
    trajectory, clipped, before = [], [], 0
    for k in range(1, STEPS + 1):
        grads = gradient(k, [p.detach().reshape(-1).tolist() for p in params])
        for p, g in zip(params, grads):
            p.grad = torch.tensor(g, dtype=torch.float64).reshape(p.shape)
        opt.step()
        trajectory.append(torch.cat([p.detach().reshape(-1) for p in params]).tolist())
        total = opt.stats()["spikes_clipped"]
        clipped.append(total - before)
        before = total
    return trajectory, clipped, opt


@pytest.fixture(scope="module")
def reference():
    return transcription()


@pytest.mark.parametrize("path", PATHS)
def test_default_follows_the_authors_code_through_two_resets(reference, path, monkeypatch):
    want, want_clipped = reference
    got, got_clipped, opt = ours(**path_options(path, monkeypatch))
    check_path(opt, path)
    for k, (a, b) in enumerate(zip(got, want), 1):
        torch.testing.assert_close(
            torch.tensor(a),
            torch.tensor(b),
            rtol=1e-6,
            atol=1e-12,
            msg=lambda text, k=k: f"call {k}: {text}",
        )
    assert got_clipped == want_clipped
    assert opt.stats()["resets"] == 2
    assert all(float(opt.state[p]["step"]) == STEPS for g in opt.param_groups for p in g["params"])
    # The windows: no clipping in calls 1-19 nor in the 20 calls from each reset,
    # spikes there included; every spike outside them is clipped.
    windows = [k for k in range(1, STEPS + 1) if k < SKIP or k % INTERVAL < SKIP]
    assert len(windows) == 19 + 20 + 20 and all(got_clipped[k - 1] == 0 for k in windows)
    for call, _, _ in SPIKES:
        assert (got_clipped[call - 1] == 0) == (call in INSIDE_WINDOWS), call


def test_restarting_bias_correction_is_an_option_that_changes_the_trajectory(reference):
    want, want_clipped = transcription(restart=True)
    got, got_clipped, opt = ours(restart_bias_correction=True)
    torch.testing.assert_close(torch.tensor(got), torch.tensor(want), rtol=1e-6, atol=1e-12)
    assert got_clipped == want_clipped
    assert (
        float(opt.state[opt.param_groups[0]["params"][0]]["step"]) == STEPS - 1000 + 1
    )  # calls 1000-1200
    default = torch.tensor(reference[0])
    assert torch.equal(torch.tensor(got[:499]), default[:499])  # same until the first reset
    assert (torch.tensor(got[499:]) - default[499:]).abs().max() > 1e-3
