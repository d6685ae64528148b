"""Holographic binding: exact inversion with unit keys, packed spectra, fused ops."""

from __future__ import annotations

import pytest
import torch

from hamt.config import HAMTConfig
from hamt.memory import HolographicMemory, bind, make_key, parseval_weights, unbind, unitary
from hamt.spectral import Unbind, UnitBind, complex_bins, from_spectrum, to_spectrum

DIM = 64
BINDINGS = ("circular", "elementwise")


def _vectors(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("binding", BINDINGS)
def test_unbind_inverts_bind_for_unit_keys(binding):
    key = make_key(_vectors(8, DIM, seed=1), binding)
    value = _vectors(8, DIM, seed=2)
    restored = unbind(key, bind(key, value, binding), binding)
    torch.testing.assert_close(restored, value, atol=1e-5, rtol=0)


@pytest.mark.parametrize("binding", BINDINGS)
def test_non_unit_key_does_not_invert(binding):
    # The same algebra with a raw key: correlation no longer undoes
    # convolution, which is why keys are projected.
    key = _vectors(8, DIM, seed=1)
    value = _vectors(8, DIM, seed=2)
    error = (unbind(key, bind(key, value, binding), binding) - value).abs().max()
    assert error > 0.1


def test_unitary_keys_have_unit_fourier_magnitudes():
    key = unitary(_vectors(16, DIM, seed=3))
    magnitudes = torch.fft.rfft(key).abs()
    torch.testing.assert_close(magnitudes, torch.ones_like(magnitudes), atol=1e-5, rtol=0)
    assert torch.allclose(unitary(key), key, atol=1e-5)  # a projection: idempotent


def test_elementwise_keys_are_phasors():
    key = make_key(_vectors(16, DIM, seed=3), "elementwise")
    moduli = torch.complex(key[..., : DIM // 2], key[..., DIM // 2 :]).abs()
    torch.testing.assert_close(moduli, torch.ones_like(moduli), atol=1e-5, rtol=0)


def test_make_key_is_safe_at_zero():
    assert torch.isfinite(unitary(torch.zeros(DIM))).all()


@pytest.mark.parametrize("binding", BINDINGS)
def test_packed_spectrum_round_trip(binding):
    x = _vectors(5, DIM, seed=4)
    packed = to_spectrum(x, binding)
    assert packed.shape == x.shape  # D reals: no stored zero imaginary parts
    torch.testing.assert_close(from_spectrum(packed, binding), x, atol=1e-5, rtol=0)
    # Parseval: the weighted squared spectrum is the squared norm.
    weighted = (packed.square() * parseval_weights(binding, DIM)).sum(-1)
    torch.testing.assert_close(weighted, x.square().sum(-1), atol=1e-4, rtol=1e-5)


def test_spectrum_backward_is_the_adjoint():
    # The hand-written backward (from_spectrum of the Parseval-scaled
    # gradient) against finite differences.
    x = _vectors(3, 16, 8, seed=5).double().requires_grad_()
    for dim in (-1, 1):  # along the last dimension or one before it
        assert torch.autograd.gradcheck(lambda t, dim=dim: to_spectrum(t, "circular", dim), (x,))
    columns = to_spectrum(x, "circular", dim=1)
    torch.testing.assert_close(columns, to_spectrum(x.transpose(1, 2), "circular").transpose(1, 2))
    torch.testing.assert_close(from_spectrum(columns, "circular", dim=1), x)


def test_folded_weights_are_the_dft_matrices_multiplied_in():
    """to_spectrum(x) = x F and from_spectrum(p) = p G for matrices F, G (the
    transforms of identity rows); the layer folds them into its weights with
    FFTs, which must equal multiplying by F and G."""
    torch.manual_seed(0)
    layer = HolographicMemory(HAMTConfig(vocab_size=11, n_embd=16, num_slots=4, hcm_mult=2))
    dim = layer.dim
    eye = torch.eye(dim, dtype=torch.float64)
    to, back = to_spectrum(eye, "circular"), from_spectrum(eye, "circular")
    with torch.no_grad():
        layer.c_in.bias.normal_()
        layer.c_proj.weight.normal_()
        w_spec, b_spec, w_out = layer._folded()
    w_in = layer.c_in.weight[: 3 * dim].double().unflatten(0, (3, dim))
    expected = (to.T @ w_in).flatten(0, 1)  # rows of F^T W
    torch.testing.assert_close(w_spec.double(), expected, atol=1e-5, rtol=0)
    b_in = layer.c_in.bias[: 3 * dim].double().view(3, dim)
    torch.testing.assert_close(b_spec.double(), (b_in @ to).flatten(), atol=1e-5, rtol=0)
    # c_proj reads a packed spectrum: W_out applied to from_spectrum(p) = p G.
    torch.testing.assert_close(
        w_out.double(), layer.c_proj.weight.double() @ back.T, atol=1e-5, rtol=0
    )


def test_fused_bind_is_circular_convolution():
    value, raw_key = _vectors(6, DIM, seed=5), _vectors(6, DIM, seed=6)
    key = unitary(raw_key)
    spec = torch.stack([to_spectrum(t, "circular") for t in (value, key, raw_key)], dim=-2)
    bound, read_key = UnitBind.apply(spec, complex_bins("circular", DIM))
    torch.testing.assert_close(bound, to_spectrum(bind(key, value), "circular"), atol=1e-5, rtol=0)
    # The unit read key of raw_key is the spectrum of unitary(raw_key), up to
    # the ortho FFT's 1/sqrt(D) scale.
    expected = to_spectrum(unitary(raw_key), "circular") * DIM**0.5
    torch.testing.assert_close(read_key, expected, atol=1e-5, rtol=0)
    trace = Unbind.apply(read_key, bound, complex_bins("circular", DIM))
    torch.testing.assert_close(
        from_spectrum(trace, "circular"),
        unbind(unitary(raw_key), bind(key, value)),
        atol=1e-5,
        rtol=0,
    )


@pytest.mark.parametrize("eps", [1e-12, 0.3])  # the default, and one larger than some |k|^2
@pytest.mark.parametrize("bins", [3, 4])  # with real-only bins (circular) and without
def test_fused_ops_gradients(bins, eps):
    width = 8
    spec = _vectors(2, 3, 3, width, seed=7).double().requires_grad_()
    assert torch.autograd.gradcheck(lambda s: UnitBind.apply(s, bins, eps), (spec,))
    unit_key = _vectors(2, 3, width, seed=8).double().requires_grad_()
    trace = _vectors(2, 3, width, seed=9).double().requires_grad_()
    assert torch.autograd.gradcheck(lambda u, t: Unbind.apply(u, t, bins), (unit_key, trace))


@pytest.mark.parametrize("eps", [1e-12, 1e-3, 0.1])
def test_unit_keys_divide_each_bin_by_its_magnitude_with_eps(eps):
    """UnitBind's keys against the formula on complex numbers:
    u = k / sqrt(|k|^2 + eps) per complex bin, the real bins likewise."""
    bins, width = complex_bins("circular", 8), 8
    spec = _vectors(5, 3, width, seed=11).double()
    spec[0, 2, 1] = 1e-3  # a small coefficient, where eps matters: Re and Im of bin 1
    spec[0, 2, 1 + bins] = -2e-3
    _, read = UnitBind.apply(spec, bins, eps)
    key = spec[:, 2]
    z = torch.complex(key[:, :bins], key[:, bins : 2 * bins])
    unit = z / (z.abs().square() + eps).sqrt()
    real = key[:, 2 * bins :] / (key[:, 2 * bins :].square() + eps).sqrt()
    torch.testing.assert_close(read, torch.cat((unit.real, unit.imag, real), -1))
    lifted = float(unit[0, 1].abs())  # |k| = 2.2e-3: lifted to 1 only when eps << |k|^2
    assert lifted == pytest.approx(1.0, abs=1e-6) if eps < 1e-8 else lifted < 0.1


@pytest.mark.parametrize("eps", [1e-12, 1e-6, 1e-3])
def test_key_eps_bounds_the_normalisation_jacobian(eps):
    """The unit key's Jacobian norm is 1 / sqrt(|k|^2 + eps): as large as
    1 / |k| near a zero coefficient at the default, at most 1 / sqrt(eps)."""
    bins = complex_bins("circular", 8)
    spec = _vectors(1, 3, 8, seed=12).double()
    spec[0, 2, 2], spec[0, 2, 2 + bins] = 3e-5, 4e-5  # |k| = 5e-5 in bin 2
    spec.requires_grad_()
    _, read = UnitBind.apply(spec, bins, eps)
    # d u / d Im(k): the tangential direction of bin 2, where the Jacobian is largest
    (grad,) = torch.autograd.grad(read[0, 2 + bins], spec)
    gain = float(grad[0, 2, 2 + bins])
    # d Im(u) / d Im(k) = (Re(k)^2 + eps) / (|k|^2 + eps)^1.5
    assert gain == pytest.approx((3e-5**2 + eps) / (5e-5**2 + eps) ** 1.5, rel=1e-9)
    assert gain <= eps**-0.5 * (1 + 1e-9)


def test_the_matrix_spectrum_equals_the_fft():
    """Under torch.compile the layer folds with packed_dft (real arithmetic,
    inductor has no complex FFT): the same packed spectra, along either dim."""
    x = _vectors(3, DIM, 10, seed=6).double()
    for dim in (1, -1):
        torch.testing.assert_close(
            to_spectrum(x, "circular", dim, matrix=True), to_spectrum(x, "circular", dim)
        )
    assert to_spectrum(x, "elementwise", matrix=True) is x
