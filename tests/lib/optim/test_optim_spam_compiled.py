"""AdamWSPAM's compiled step (OPTIMIZER_IMPL=fused) against the per-parameter reference."""

from __future__ import annotations

import pytest
import torch

from lib.optim import spam_compiled
from tests.lib.optim.test_optim_spam_foreach import LAGGING, SHAPES, gradients, make, train


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

    monkeypatch.setattr(spam_compiled, "compiled_math", broken)
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
