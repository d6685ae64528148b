"""Packed real spectra and the fused bind / unbind used by the layer.

Every spectrum is a real vector of P = D numbers ("packed"):
[Re of K complex bins, Im of those K bins, E real-only bins].

circular: the orthonormal rfft of a real D-vector has D/2 + 1 bins, of
which DC and Nyquist are real, so K = D/2 - 1 complex bins and E = 2 real
ones (the halfcomplex layout): exactly D numbers, no stored zeros.
elementwise: coordinate k is the real part and k + D/2 the imaginary part
of complex number k (K = D/2, E = 0); the vector already is packed.

The packing is linear, so the layer folds the DFT into its projections
(memory.py); width D rather than D + 2 keeps the matmuls on sizes the
BLAS handles well. Complex arithmetic on the contiguous halves is a few
vectorised real products (torch's complex kernels, abs and sgn measured
several times slower on CPU). The autograd Functions do it with
hand-written, mostly in-place backward passes: these tensors are as large
as the stream, so on a CPU every extra elementwise pass costs about as
much as a small matmul.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

# Added to a coefficient's squared magnitude before dividing by it: keeps a
# zero coefficient finite, far below real magnitudes (HAMTConfig.key_eps).
KEY_EPS = 1e-12


def complex_bins(binding: str, dim: int) -> int:
    """K, the number of complex bins in a packed spectrum of width dim."""
    return dim // 2 - 1 if binding == "circular" else dim // 2


def to_spectrum(x: Tensor, binding: str, dim: int = -1, matrix: bool = False) -> Tensor:
    """Real vectors of width D along dim -> packed spectra of width D.
    matrix: as a product with packed_dft (real arithmetic only) rather than
    an FFT; the same to float rounding."""
    if binding != "circular":
        return x
    if matrix:
        dft = packed_dft(x.size(dim), x.device).to(x.dtype)
        return (x.movedim(dim, -1) @ dft).movedim(-1, dim)
    return PackedRfft.apply(x, dim)


def packed_dft(dim: int, device: torch.device | None = None) -> Tensor:
    """F [D, D] (float64) with to_spectrum(x, "circular") = x @ F: per
    complex bin j the orthonormal cos(2 pi j n / D) and -sin columns, then
    the DC and Nyquist columns. j n is reduced mod D in integers first, so
    the angles stay exact for any D."""
    k = complex_bins("circular", dim)
    n = torch.arange(dim, device=device)
    turns = (n.unsqueeze(-1) * torch.arange(1, k + 1, device=device)) % dim
    angle = turns.double() * (2 * math.pi / dim)
    edges = torch.stack((torch.ones_like(n), 1 - 2 * (n % 2)), -1).double()  # DC, Nyquist
    return torch.cat((angle.cos(), -angle.sin(), edges), -1) / math.sqrt(dim)


def _packed_rfft(x: Tensor, dim: int) -> Tensor:
    # "ortho" keeps norms, up to the Parseval weights (see memory.py).
    z = torch.fft.rfft(x, dim=dim, norm="ortho")
    bins = z.size(dim)
    return torch.cat(
        (
            z.real.narrow(dim, 1, bins - 2),
            z.imag.narrow(dim, 1, bins - 2),
            z.real.narrow(dim, 0, 1),
            z.real.narrow(dim, bins - 1, 1),
        ),
        dim,
    )


class PackedRfft(torch.autograd.Function):
    """to_spectrum for the circular binding, with its adjoint as backward.

    The packing is p = x F for a real D x D matrix F with F diag(w) F^T = I
    (Parseval: sum w p^2 = |x|^2, w = 2 on complex-bin entries, 1 on the
    real bins). So the gradient g F^T is from_spectrum(g / w): one inverse
    FFT, where autograd's rfft backward runs a full complex FFT on a
    zero-padded copy, several times slower on CPU.
    """

    @staticmethod
    def forward(ctx, x: Tensor, dim: int) -> Tensor:
        ctx.dim = dim
        return _packed_rfft(x, dim)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad: Tensor) -> tuple[Tensor, None]:
        k = complex_bins("circular", grad.size(ctx.dim))
        halved = grad.clone()
        halved.narrow(ctx.dim, 0, 2 * k).mul_(0.5)
        return from_spectrum(halved, "circular", ctx.dim), None


def from_spectrum(p: Tensor, binding: str, dim: int = -1) -> Tensor:
    """Packed spectra of width D along dim -> real vectors (inverse of to_spectrum)."""
    if binding != "circular":
        return p
    width = p.size(dim)
    k = complex_bins(binding, width)
    zero = torch.zeros_like(p.narrow(dim, 0, 1))
    re = torch.cat((p.narrow(dim, 2 * k, 1), p.narrow(dim, 0, k), p.narrow(dim, 2 * k + 1, 1)), dim)
    im = torch.cat((zero, p.narrow(dim, k, k), zero), dim)
    return torch.fft.irfft(torch.complex(re, im), n=width, dim=dim, norm="ortho")


def _pmul(a: Tensor, b: Tensor, k: int, conj_a: bool = False, conj_out: bool = False) -> Tensor:
    """a * b (or conj(a) * b; conj_out: the conjugate of that) of packed
    spectra: two passes per complex half, one over the real bins, then one
    concatenation. Fresh tensors rather than out= writes into views: those
    are non-contiguous, which torch.compile cannot trace (a graph break)."""
    sign = -1 if conj_a else 1
    re = torch.mul(a[..., :k], b[..., :k]).addcmul_(
        a[..., k : 2 * k], b[..., k : 2 * k], value=-sign
    )
    im = torch.mul(a[..., :k], b[..., k : 2 * k]).addcmul_(
        a[..., k : 2 * k], b[..., :k], value=sign
    )
    if conj_out:
        im = im.neg_()
    return torch.cat((re, im, a[..., 2 * k :] * b[..., 2 * k :]), -1)


def _per_bin(squares: Tensor, k: int) -> Tensor:
    """In place: entry-wise products -> their per-bin sum, on both the Re
    and Im entry of each complex bin (real bins keep their own)."""
    squares[..., :k] += squares[..., k : 2 * k]
    squares[..., k : 2 * k] = squares[..., :k]
    return squares


class UnitBind(torch.autograd.Function):
    """Packed spectra [..., 3, P] of (value, write key, read key) -> (bound, unit read key).

    Keys are made unitary, u = k / sqrt(|k|^2 + eps) per bin (real bins
    become +-1), and the unit write key binds the value: bound = u_a * v.
    Both outputs are packed [..., P]. k is the number of complex bins. The
    Jacobian of u grows as 1 / |k|, bounded by 1 / sqrt(eps): a larger eps
    shrinks coefficients under sqrt(eps) instead of lifting them to 1.
    """

    @staticmethod
    def forward(ctx, spec: Tensor, k: int, eps: float = KEY_EPS) -> tuple[Tensor, Tensor]:
        keys = spec[..., 1:, :]
        inv = _per_bin(keys.square(), k).add_(eps).rsqrt_()  # 1 / |bin|, per entry
        units = keys * inv
        bound = _pmul(units[..., 0, :], spec[..., 0, :], k)
        ctx.save_for_backward(spec, units, inv)
        ctx.bins = k
        return bound, units[..., 1, :]

    @staticmethod
    def backward(ctx, grad_bound: Tensor, grad_read: Tensor | None):
        spec, units, inv = ctx.saved_tensors
        k = ctx.bins
        grad_value = _pmul(units[..., 0, :], grad_bound, k, conj_a=True)  # conj(u) g
        # Write key: g conj(v) = conj(conj(g) v).
        grad_write = _pmul(grad_bound, spec[..., 0, :], k, conj_a=True, conj_out=True)
        grad_read = torch.zeros_like(grad_write) if grad_read is None else grad_read
        # du = (I - u u^T) dk / sqrt(|k|^2 + eps) per bin, eps or not: drop
        # the radial part (u u^T = k k^T / (|k|^2 + eps)).
        grad_keys = torch.stack((grad_write, grad_read), -2)
        radial = _per_bin(grad_keys * units, k)
        grad_keys.addcmul_(radial, units, value=-1).mul_(inv)
        return torch.cat((grad_value.unsqueeze(-2), grad_keys), -2), None, None


class Unbind(torch.autograd.Function):
    """conj(u) * trace for a unit key u and a trace, packed [..., P] with k complex bins."""

    @staticmethod
    def forward(ctx, units: Tensor, trace: Tensor, k: int) -> Tensor:
        ctx.save_for_backward(units, trace)
        ctx.bins = k
        return _pmul(units, trace, k, conj_a=True)

    @staticmethod
    def backward(ctx, grad: Tensor):
        units, trace = ctx.saved_tensors
        k = ctx.bins
        grad_units = _pmul(grad, trace, k, conj_a=True)  # conj(g) t
        grad_trace = _pmul(units, grad, k)  # u g
        return grad_units, grad_trace, None
