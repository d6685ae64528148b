"""AdamWSPAM's code paths against each other, in one process: the same inputs and
calls (resets, clipped spikes, a damped gradient-norm spike, a parameter that misses
calls), the same weights, moments, counts and state layout."""

from __future__ import annotations

import math

import pytest
import torch

from lib.optim.spam import AdamWSPAM
from tests.lib.optim.spam_paths import (  # PATHS: "compiled" is pytest.mark.slow
    PATHS,
    check_path,
    path_options,
)
from tests.lib.optim.test_optim_spam_foreach import LAGGING, SHAPES, gradients

STEPS, NORM_SPIKE = 40, 25  # resets at calls 9, 18, 27 and 36; call 25's gradient norm spikes
VARIANTS = {
    "authors": {},
    "amsgrad-damping": {"amsgrad": True, "spike_reset": True},
    "spare-restart": {"spare_unseen": True, "restart_bias_correction": True},
}
# loop and foreach run the same CPU kernels; the one-pass step rounds differently
# (1 ulp per step, compounding over the calls, see test_optim_spam_fused.py)
TOLERANCE = {
    "loop": dict(rtol=0, atol=0),
    "foreach": dict(rtol=0, atol=0),
    "fused": dict(rtol=2e-5, atol=1e-6),
    "compiled": dict(rtol=2e-5, atol=1e-6),
}


def make(params, options):
    return AdamWSPAM(
        [{"params": params[:3], "weight_decay": 0.1}, {"params": params[3:], "weight_decay": 0.0}],
        lr=1e-2,
        betas=(0.9, 0.99),
        eps=1e-8,
        theta=4.3,
        interval=9,
        warmup_steps=4,
        clip_skip_steps=2,
        **options,
    )


def run(options, calls=range(1, STEPS + 1), opt=None, params=None):
    """Train the SHAPES parameters (two groups) through `calls`; (params, opt, stats per call)."""
    if params is None:
        gen = torch.Generator().manual_seed(0)
        params = [torch.randn(s, generator=gen).requires_grad_() for s in SHAPES]
        opt = make(params, options)
    grads, history = gradients(STEPS), []
    for k in calls:
        for p, g in zip(params, grads[k - 1]):
            p.grad = None if g is None else g * (20.0 if k == NORM_SPIKE else 1.0)
        opt.step()
        history.append(opt.stats())
    return params, opt, history


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("path", PATHS)
def test_every_path_gives_the_per_parameter_result(path, variant, monkeypatch):
    want, ref, want_stats = run({"foreach": False, **VARIANTS[variant]})
    got, opt, got_stats = run({**path_options(path, monkeypatch), **VARIANTS[variant]})
    check_path(opt, path)
    assert got_stats == want_stats  # every call's clip, reset and damping counts
    last = want_stats[-1]
    assert last["resets"] == 4 and last["spikes_clipped"] > 100
    assert last.get("spike_resets", 1) >= 1  # the damping ran (with spike_reset)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, **TOLERANCE[path])
        assert sorted(opt.state[a]) == sorted(ref.state[b])  # one state layout
        for key in opt.state[a]:
            torch.testing.assert_close(opt.state[a][key], ref.state[b][key], **TOLERANCE[path])
    assert float(opt.state[got[LAGGING]]["step"]) < float(opt.state[got[0]]["step"])


def test_paths_differ_from_a_run_without_the_rule():
    """The comparison above would see a path that skipped clipping, a reset or damping."""
    base = {"foreach": False, "amsgrad": True, "spike_reset": True}
    want = [p.detach() for p in run(base)[0]]
    for change in ({"clip": False}, {"reset": False}, {"spike_reset": False}):
        other = [p.detach() for p in run({**base, **change})[0]]
        assert max(float((a - b).abs().max()) for a, b in zip(other, want) if a.numel()) > 1e-4


@pytest.mark.parametrize("resume_on", ["loop", "foreach", "fused"])
def test_a_checkpoint_resumes_on_any_path(resume_on, monkeypatch):
    options = {"amsgrad": True, "spike_reset": True}
    whole, ref, _ = run({"foreach": True, **options})
    half, opt, _ = run({"foreach": True, **options}, calls=range(1, 23))
    params = [p.detach().clone().requires_grad_() for p in half]
    resumed = make(params, {**path_options(resume_on, monkeypatch), **options})
    resumed.load_state_dict(opt.state_dict())
    run({}, calls=range(23, STEPS + 1), opt=resumed, params=params)
    for a, b in zip(params, whole):
        torch.testing.assert_close(a, b, **TOLERANCE[resume_on])
    assert resumed.stats() == ref.stats()


# A checkpoint of AdamWSPAM as it was before its paths shared one step (lib/optim/spam.py
# with spam_foreach.step_group, default path), float64, after 12 calls of old_grad():
# two resets, AMSGrad, spike damping armed (12 norms kept); then its weights 6 calls on.
OLD_PARAMS = [[0.236730140301945, -1.140371730293693, 1.697469548897465], [1.29293200362115, 0.08448905385931117]]  # fmt: skip
OLD_STATE = {
    0: {
        "step": 12.0,
        "exp_avg": [0.1336183719976173, 0.11618932928132437, 0.06534649040973484],
        "exp_avg_sq": [0.011486197560603149, 0.012477749375184513, 0.009324657383349227],
        "max_exp_avg_sq": [0.011486197560603149, 0.012994066167315226, 0.010690247396548308],
    },
    1: {
        "step": 12.0,
        "exp_avg": [0.10091991656534556, 0.030016252661054982],
        "exp_avg_sq": [0.011401819160551555, 0.007989333765622893],
        "max_exp_avg_sq": [0.012429336221228965, 0.009084905026675852],
    },
}
OLD_GROUP = {"lr": 0.05, "betas": (0.9, 0.99), "eps": 1e-06, "theta": 2.0, "clip": True, "amsgrad": True}  # fmt: skip
OLD_SPAM = {
    "global_step": 12,
    "warmup_count": 3,
    "spikes_clipped": 32,
    "resets": 2,
    "spike_resets": 0,
    "spike_norms": [
        1.5855317307727734,
        1.3778823431878109,
        1.8753196794012672,
        1.1656887750527642,
        1.8544236378235883,
        1.42552664263856,
        1.537187220447741,
        1.789624635866519,
        30.36094577582247,
        1.904305624342391,
        1.2794326863674175,
        1.688993545177284,
    ],  # fmt: skip
}
OLD_AFTER = [[0.16047992409439238, -1.1674929548945303, 1.6194583926284667], [1.2407322784602115, 0.08001472667815314]]  # fmt: skip
OLD_STATS = {"spikes_clipped": 49, "resets": 3, "spike_resets": 1}


def old_grad(k: int, i: int, n: int) -> torch.Tensor:
    spike = {(9, 1), (13, 0)}  # entry 0 at call 13: a gradient-norm spike, damped
    return torch.tensor(
        [math.sin(1.3 * k + 0.7 * e + i) * (40.0 if (k, e) in spike else 1.0) for e in range(n)],
        dtype=torch.float64,
    )


@pytest.mark.parametrize("path", ["loop", "foreach", "fused"])
def test_a_checkpoint_of_the_previous_code_loads_on_every_path(path, monkeypatch):
    params = [torch.tensor(x, dtype=torch.float64, requires_grad=True) for x in OLD_PARAMS]
    opt = AdamWSPAM(
        [{"params": params[:1], "weight_decay": 0.1}, {"params": params[1:], "weight_decay": 0.0}],
        lr=0.05,
        betas=(0.9, 0.99),
        theta=2.0,
        interval=5,
        warmup_steps=2,
        clip_skip_steps=2,
        amsgrad=True,
        spike_reset=True,
        **path_options(path, monkeypatch),
    )
    state = {
        i: {
            key: torch.tensor(value, dtype=torch.float32 if key == "step" else torch.float64)
            for key, value in entry.items()
        }
        for i, entry in OLD_STATE.items()
    }
    groups = [{"weight_decay": 0.1, **OLD_GROUP, "params": [0]}, {"weight_decay": 0.0, **OLD_GROUP, "params": [1]}]  # fmt: skip
    saved = {"state": state, "param_groups": groups, "spam": OLD_SPAM}
    assert opt.state_dict().keys() == saved.keys()  # the layout is still the old one
    opt.load_state_dict(saved)
    for k in range(13, 19):
        for i, p in enumerate(params):
            p.grad = old_grad(k, i, p.numel())
        opt.step()
    check_path(opt, path)
    assert opt.stats() == OLD_STATS
    assert all(sorted(opt.state[p]) == sorted(OLD_STATE[0]) for p in params)
    exact = path != "fused"  # on CPU loop and foreach repeat the old code to the bit
    for p, want in zip(params, OLD_AFTER):
        torch.testing.assert_close(
            p.detach(),
            torch.tensor(want, dtype=torch.float64),
            **(dict(rtol=0, atol=0) if exact else dict(rtol=1e-12, atol=1e-14)),
        )
