"""Reaching GPT-2's per-head keys and values from outside the family.

lib/eval/kv_circuit.py masks K/V channels of a trained model; how GPT-2 lays
out its attention is this folder's business, so the masking is hooked in
here: every attention layer built on CausalSelfAttention (vanilla, the SDPA
gate, the RA forms) computes its keys and values in qkv(), and a transform
wrapped around that call sees them as [B, H_kv, T, D] before attention (and
before a generation cache stores them). The MLA forms cache a shared latent,
not per-head K/V, and have no such site.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence

from torch import Tensor, nn

from gpt2.attention import CausalSelfAttention

KVTransform = Callable[[Tensor, Tensor], tuple[Tensor, Tensor]]


def kv_sites(model: nn.Module) -> list[tuple[str, int, int]]:
    """(name, KV heads, head width) of each attention layer with per-head K/V,
    in forward order; empty for a model without any."""
    return [
        (name, module.n_kv_head, module.head_dim)
        for name, module in model.named_modules()
        if isinstance(module, CausalSelfAttention)
    ]


@contextlib.contextmanager
def transformed_kv(model: nn.Module, transforms: Sequence[KVTransform]) -> Iterator[None]:
    """Within the block, kv_sites(model)[i]'s keys and values pass through
    transforms[i] (k, v) -> (k', v'); the model is unchanged afterwards."""
    layers = [m for m in model.modules() if isinstance(m, CausalSelfAttention)]
    if len(layers) != len(transforms):
        raise ValueError(f"{len(transforms)} transforms for {len(layers)} attention layers")
    for layer, transform in zip(layers, transforms):
        original = layer.qkv

        def qkv(x: Tensor, n_past: int, original=original, transform=transform):
            q, k, v = original(x, n_past)
            return (q, *transform(k, v))

        layer.qkv = qkv  # type: ignore[method-assign]  # an instance attribute shadows the method
    try:
        yield
    finally:
        for layer in layers:
            del layer.qkv  # the class's method again
