"""AdamWSPAM's one-pass step (OPTIMIZER_IMPL=fused): its device scalars, its agreement with
the per-parameter path to the ulp, its fallback. Against the rule's transcription:
test_optim_spam_reference.py, with the other paths."""

from __future__ import annotations

import math

import pytest
import torch

from lib.optim import spam_fused
from tests.lib.optim.spam_paths import eager_math
from tests.lib.optim.test_optim_spam_foreach import LAGGING, SHAPES, gradients, make, train


def fused_train(grads, spare_unseen=False):
    gen = torch.Generator().manual_seed(0)
    params = [torch.randn(s, generator=gen).requires_grad_() for s in SHAPES]
    opt = make(params, foreach=None, spare_unseen=spare_unseen)
    opt.fused = True
    return train(None, None, grads, opt=opt, params=params)


def test_device_scalars_are_refilled_not_recreated(monkeypatch):
    """One scalar per group and role, whatever the number of calls (nothing grows)."""
    monkeypatch.setattr(spam_fused, "compiled_math", eager_math)
    _, opt, _ = fused_train(gradients(20))
    assert opt.impl == "fused (compiled)"
    held = opt._fused_steps._scalars
    # per group: theta with and without clipping, the step value, the decay factor
    assert len(held) == 2 * 4
    values = {
        key[0][1:]: value
        for key, (value, _) in held.items()
        if key[0][0] == id(opt.param_groups[0])
    }
    assert values[("decay",)] == pytest.approx(1 - 1e-2 * 0.1)
    assert values[("theta", False)] == math.inf and values[("theta", True)] == 4.3


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
