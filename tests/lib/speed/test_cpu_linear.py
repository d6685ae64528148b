"""CPU_LINEAR_BACKEND (lib/speed/cpu_linear.py): oneDNN's linear kernel
gives nn.Linear's fp32 numbers and gradients, the swap keeps the model's
parameters, auto picks it only where it applies, and a run records it."""

from __future__ import annotations

import copy
import json

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from lib.speed import cpu_linear
from lib.speed.cpu_linear import OneDNNLinear, convert_linears, resolve_cpu_linear
from lib.train.naming import create_run_dir
from lib.train.trainer import Trainer
from tests.lib.model.test_fused_loss import _tiny
from tests.lib.stops import train_until

CPU = torch.device("cpu")
needs_onednn = pytest.mark.skipif(
    not cpu_linear.onednn_available(), reason="this PyTorch lacks oneDNN's linear kernel"
)


@pytest.fixture
def onednn_calls(monkeypatch):
    """How many products went through oneDNN."""
    calls = []
    real = cpu_linear.onednn_linear

    def counted(*args):
        calls.append(args[0].shape)
        return real(*args)

    monkeypatch.setattr(cpu_linear, "onednn_linear", counted)
    return calls


def _inputs(kind: str) -> torch.Tensor:
    x = torch.randn(3, 7, 24, dtype=torch.float32)
    if kind == "2d":
        return x[0].clone()
    if kind == "last_position":  # what generation feeds the head: a strided view
        return x[:, -1:, :]
    return x


@needs_onednn
@pytest.mark.parametrize("kind", ["2d", "3d", "last_position"])
@pytest.mark.parametrize("bias", [True, False])
def test_forward_and_every_gradient_equal_nn_linear(kind, bias, onednn_calls):
    torch.manual_seed(0)
    ref = nn.Linear(24, 40, bias=bias)
    fast = copy.deepcopy(ref)
    fast.__class__ = OneDNNLinear
    x = _inputs(kind)
    xr, xf = x.detach().clone().requires_grad_(), x.detach().clone().requires_grad_()
    upstream = torch.randn(*x.shape[:-1], 40)
    yr, yf = ref(xr), fast(xf)
    assert yf.shape == yr.shape
    torch.testing.assert_close(yf, yr, rtol=1e-5, atol=1e-6)
    (yr * upstream).sum().backward()
    (yf * upstream).sum().backward()
    # dL/dx = g W, dL/dW = g^T x, dL/db = sum of g: by hand, in float64.
    g = upstream.reshape(-1, 40).double()
    x2, w = x.reshape(-1, 24).double(), ref.weight.detach().double()
    torch.testing.assert_close(xf.grad.double(), (g @ w).reshape(x.shape), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(fast.weight.grad.double(), g.t() @ x2, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(xf.grad, xr.grad, rtol=1e-5, atol=1e-6)
    if bias:
        torch.testing.assert_close(fast.bias.grad.double(), g.sum(0), rtol=1e-5, atol=1e-6)
    assert len(onednn_calls) == 2  # the forward and the input gradient


@needs_onednn
def test_the_converted_model_keeps_its_parameters_and_trains_alike(onednn_calls):
    torch.manual_seed(0)
    ref = _tiny("gpt2")
    model = copy.deepcopy(ref)
    before = {name: id(p) for name, p in model.named_parameters()}
    names = convert_linears(model)
    linears = [n for n, m in ref.named_modules() if isinstance(m, nn.Linear)]
    assert names == linears and "lm_head" in names
    assert {name: id(p) for name, p in model.named_parameters()} == before
    assert list(model.state_dict()) == list(ref.state_dict())
    assert model.lm_head.weight is model.transformer.wte.weight  # still tied
    assert all(isinstance(model.get_submodule(n), nn.Linear) for n in names)
    x = torch.randint(0, 72, (4, 16))
    opt_ref = torch.optim.AdamW(ref.parameters(), lr=1e-2)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    for _ in range(5):
        for m, o in ((ref, opt_ref), (model, opt)):
            o.zero_grad()
            m(x, x)[1].backward()
            o.step()
    assert onednn_calls  # the converted model's products went through oneDNN
    for (name, p), q in zip(model.named_parameters(), ref.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-5, msg=name)
    assert model(x, x)[1].item() == pytest.approx(ref(x, x)[1].item(), rel=1e-5)


@needs_onednn
def test_inputs_the_kernel_is_not_for_take_nn_linear_s_path(onednn_calls):
    torch.manual_seed(0)
    ref = nn.Linear(16, 8)
    fast = copy.deepcopy(ref)
    fast.__class__ = OneDNNLinear
    x = torch.randn(5, 16)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert torch.equal(fast(x), ref(x))
    assert torch.equal(fast.double()(x.double()), ref.double()(x.double()))
    assert onednn_calls == []


def test_auto_picks_onednn_only_for_fp32_eager_cpu_training(monkeypatch):
    monkeypatch.setattr(cpu_linear, "onednn_available", lambda: True)
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AVX512")
    monkeypatch.setattr(cpu_linear, "cpu_vendor", lambda: "AuthenticAMD")
    assert resolve_cpu_linear("auto", CPU, "fp32", False) == ("onednn", "auto: fp32 eager on a CPU")
    assert resolve_cpu_linear("onednn", CPU, "fp32", False) == ("onednn", "as configured")
    assert resolve_cpu_linear("aten", CPU, "fp32", False) == ("aten", "as configured")
    refused = [
        (torch.device("cuda"), "fp32", False, "the run is on cuda"),
        (CPU, "bf16", False, "the run autocasts to bf16"),
        (CPU, "fp32", True, "the model is compiled"),
    ]
    for device, dtype, compiled, why in refused:
        backend, reason = resolve_cpu_linear("auto", device, dtype, compiled)
        assert backend == "aten" and why in reason
        with pytest.raises(
            RuntimeError, match=f"CONFIG_CPU_LINEAR_BACKEND_ONEDNN is set but {why}"
        ):
            resolve_cpu_linear("onednn", device, dtype, compiled)
    # On an Intel CPU, or one whose maker the OS does not name, oneDNN is not measured
    # faster: auto keeps PyTorch's linear even with AVX-512 kernels.
    for vendor, named in (("GenuineIntel", "on an Intel CPU"), (None, "an unnamed maker")):
        monkeypatch.setattr(cpu_linear, "cpu_vendor", lambda v=vendor: v)
        backend, reason = resolve_cpu_linear("auto", CPU, "fp32", False)
        assert backend == "aten" and named in reason
        assert resolve_cpu_linear("onednn", CPU, "fp32", False) == ("onednn", "as configured")
    monkeypatch.setattr(cpu_linear, "cpu_vendor", lambda: "AuthenticAMD")
    # On AVX2 kernels (no AVX-512, or ATEN_CPU_CAPABILITY=avx2) oneDNN measured slower:
    # auto keeps PyTorch's linear; asked for by name, oneDNN still runs.
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AVX2")
    backend, reason = resolve_cpu_linear("auto", CPU, "fp32", False)
    assert backend == "aten" and "PyTorch runs its AVX2 kernels here" in reason
    assert resolve_cpu_linear("onednn", CPU, "fp32", False) == ("onednn", "as configured")
    monkeypatch.setattr(cpu_linear, "onednn_available", lambda: False)
    assert resolve_cpu_linear("auto", CPU, "fp32", False)[0] == "aten"
    with pytest.raises(RuntimeError, match="lacks oneDNN's linear kernel"):
        resolve_cpu_linear("onednn", CPU, "fp32", False)
    with pytest.raises(ValueError, match="unknown CPU linear backend"):
        resolve_cpu_linear("mkl", CPU, "fp32", False)


def test_a_broken_kernel_is_not_available(monkeypatch):
    def wrong(x, w, b):
        return F.linear(x, w, b) + 1.0

    monkeypatch.setattr(cpu_linear, "onednn_linear", wrong)
    cpu_linear.onednn_available.cache_clear()
    try:
        assert cpu_linear.onednn_available() is False
    finally:
        cpu_linear.onednn_available.cache_clear()


@needs_onednn
def test_a_run_records_the_kernel_and_matches_the_aten_run(tiny_run, onednn_calls):
    def train(**settings):
        run = tiny_run(GPT2_MAX_ITERS="12", GPT2_EVAL_INTERVAL="6", **settings)
        run_dir = create_run_dir(run)
        summary = train_until(Trainer(run, run_dir, log=lambda _: None), None)
        return summary, json.loads((run_dir / "metrics.json").read_text())["speed"]

    aten, aten_speed = train(RUN_NAME="aten", CPU_LINEAR_BACKEND_ATEN="y")
    assert onednn_calls == []
    fast, speed = train(RUN_NAME="onednn", CPU_LINEAR_BACKEND_ONEDNN="y")
    assert onednn_calls
    assert (aten_speed["cpu_linear"], aten_speed["cpu_linear_layers"]) == ("aten", 0)
    # 2 blocks x (c_attn, c_proj, c_fc, mlp c_proj) + the head
    assert (speed["cpu_linear"], speed["cpu_linear_layers"]) == ("onednn", 9)
    assert speed["cpu_linear_reason"] == "as configured"
    losses = fast["train_loss"]["values"]
    assert len(losses) == 12 and losses[-1] < losses[0]
    assert losses == pytest.approx(aten["train_loss"]["values"], rel=1e-4)
    assert fast["best_val_loss"] == pytest.approx(aten["best_val_loss"], rel=1e-4)
