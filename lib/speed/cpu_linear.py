"""fp32 linear layers through oneDNN on a CPU (CPU_LINEAR_BACKEND).

PyTorch's CPU wheels send an fp32 nn.Linear to the BLAS they were built
with (MKL for the x86 wheels). They also carry oneDNN, which PyTorch uses
for bf16 matmuls and for inductor's frozen inference graphs but not for
fp32 training. On a 2-core AMD EPYC with AVX-512 oneDNN's linear kernel
(torch.ops.mkldnn._linear_pointwise, which takes ordinary dense tensors)
runs the products of gpt2-shakespeare-char at 390-420 GFLOP/s against
MKL's 200-210 (docs/benchmarks.md). On a 2-core EPYC with AVX2 and no
AVX-512, and on a 2-core Intel Xeon with AVX-512, it made the step slower
than MKL, so auto takes it only on AMD CPUs where PyTorch runs its AVX-512
kernels.

OneDNNLinear is an nn.Linear whose forward and input gradient go through
that kernel; the weight gradient stays a torch matmul (oneDNN would need
two transposed copies of the activations for it). The arithmetic is fp32
throughout, as nn.Linear's: results differ only in summation order.
convert_linears swaps the class of every plain nn.Linear in place, so the
parameters, their names, tied weights, hooks and isinstance checks are
untouched. Inputs the kernel is not for (not fp32, not on a CPU, under
autocast, under torch.compile's tracing) take nn.Linear's own path, so a
converted model stays correct wherever it is moved.
"""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lib.run.environment import cpu_vendor

BACKENDS = ("auto", "aten", "onednn")


def onednn_linear(x: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
    """x @ weight.T + bias for 2-D contiguous fp32 x and weight, by oneDNN."""
    return torch.ops.mkldnn._linear_pointwise(x, weight, bias, "none", [], "")


@functools.cache
def onednn_available() -> bool:
    """Whether this PyTorch has the oneDNN linear kernel and it gives
    nn.Linear's numbers on a small product (checked once per process)."""
    if not torch.backends.mkldnn.is_available():
        return False
    try:
        gen = torch.Generator().manual_seed(0)
        x, w, b = (torch.randn(*s, generator=gen) for s in ((5, 8), (3, 8), (3,)))
        return torch.allclose(onednn_linear(x, w, b), F.linear(x, w, b), rtol=1e-5, atol=1e-6)
    except (RuntimeError, AttributeError):
        return False


class _LinearFunction(torch.autograd.Function):
    """y = x W^T + b with oneDNN for y and dL/dx, torch for dL/dW and dL/db."""

    @staticmethod
    def forward(ctx, x: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
        x2 = x.reshape(-1, x.shape[-1]).contiguous()
        ctx.save_for_backward(x2, weight)
        ctx.input_shape = x.shape
        ctx.has_bias = bias is not None
        y = onednn_linear(x2, weight.contiguous(), bias)
        return y.view(*x.shape[:-1], weight.shape[0])

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor | None, ...]:
        x2, weight = ctx.saved_tensors
        g2 = grad.reshape(-1, grad.shape[-1]).contiguous()
        grad_x = grad_w = grad_b = None
        if ctx.needs_input_grad[0]:
            grad_x = onednn_linear(g2, weight.t().contiguous(), None).view(ctx.input_shape)
        if ctx.needs_input_grad[1]:
            grad_w = g2.t() @ x2
        if ctx.has_bias and ctx.needs_input_grad[2]:
            grad_b = g2.sum(0)
        return grad_x, grad_w, grad_b


class OneDNNLinear(nn.Linear):
    """nn.Linear whose fp32 CPU products run on oneDNN (module docstring)."""

    def forward(self, x: Tensor) -> Tensor:
        if (
            x.device.type != "cpu"
            or x.dtype != torch.float32
            or self.weight.dtype != torch.float32
            or torch.is_autocast_enabled("cpu")
            or torch.compiler.is_compiling()
        ):
            return F.linear(x, self.weight, self.bias)
        return _LinearFunction.apply(x, self.weight, self.bias)


def convert_linears(model: nn.Module) -> list[str]:
    """Make every plain nn.Linear of model a OneDNNLinear in place (subclasses,
    such as torchao's float8 layers, are left alone); return their names."""
    names = []
    for name, module in model.named_modules():
        if type(module) is nn.Linear:
            module.__class__ = OneDNNLinear
            names.append(name)
    return names


# Where oneDNN's fp32 linear measured faster than PyTorch's own (MKL) in training
# (docs/benchmarks.md, the CPU sections): AVX-512 CPUs of this maker. MKL takes its
# fastest paths on Intel's own CPUs, where it measured faster than oneDNN; on AMD CPUs
# with AVX2 only, oneDNN measured slower.
ONEDNN_FASTER_VENDORS = ("AuthenticAMD",)


def why_not_onednn() -> str | None:
    """None where auto takes oneDNN's linear on this CPU (measured faster than MKL's
    there); else why PyTorch's own linear stays (the kernels ATEN_CPU_CAPABILITY
    lets PyTorch run, and the CPU's maker)."""
    kernels = torch.backends.cpu.get_cpu_capability()
    if not kernels.startswith("AVX512"):
        return (
            f"PyTorch runs its {kernels} kernels here, where oneDNN's linear measured "
            f"slower than MKL's (docs/benchmarks.md)"
        )
    vendor = cpu_vendor()
    if vendor not in ONEDNN_FASTER_VENDORS:
        maker = (
            "an Intel CPU"
            if vendor == "GenuineIntel"
            else f"a CPU by {vendor or 'an unnamed maker'}"
        )
        return (
            f"on {maker} with AVX-512 oneDNN's linear is not measured faster than MKL's "
            f"(it was slower on Intel; docs/benchmarks.md)"
        )
    return None


def resolve_cpu_linear(
    choice: str, device: torch.device, dtype: str, compiled: bool
) -> tuple[str, str]:
    """(backend, reason) for CPU_LINEAR_BACKEND on this run: what auto picks,
    or an error for an explicit oneDNN the run cannot use."""
    if choice not in BACKENDS:
        raise ValueError(f"unknown CPU linear backend {choice!r}; one of {', '.join(BACKENDS)}")
    if choice == "aten":
        return "aten", "as configured"
    why_not = None
    if device.type != "cpu":
        why_not = f"the run is on {device.type}, not a CPU"
    elif dtype != "fp32":
        why_not = f"the run autocasts to {dtype}, whose CPU matmuls PyTorch already gives to oneDNN"
    elif compiled:
        why_not = "the model is compiled, and torch.compile picks its own kernels"
    elif not onednn_available():
        why_not = "this PyTorch lacks oneDNN's linear kernel (torch.ops.mkldnn._linear_pointwise)"
    elif choice == "auto":
        why_not = why_not_onednn()
    if why_not is None:
        return "onednn", "as configured" if choice == "onednn" else "auto: fp32 eager on a CPU"
    if choice == "auto":
        return "aten", f"auto: {why_not}"
    raise RuntimeError(
        f"CONFIG_CPU_LINEAR_BACKEND_ONEDNN is set but {why_not}; the oneDNN path "
        f"is for fp32 eager training on a CPU. Choose auto (oneDNN where it "
        f"applies, PyTorch's default elsewhere) or aten"
    )
