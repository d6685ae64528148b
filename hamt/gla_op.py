"""Gated linear attention as a torch.library custom op pair, so that
torch.compile traces HAMT's layer as one graph around the kernel.

fla-core's chunk_gla is wrapped in torch.compiler.disable: under compile
every layer's graph breaks before and after it. Registered as custom ops
(gla_forward, gla_backward, with shapes for tracing and the backward as the
forward's autograd formula) the kernel is one opaque node of the graph.

An implementation computes, in chunk_gla's layout (hamt/kernel.py), the
outputs o [B, T, H, V] and final state [B, H, K, V] (float32) plus two
tensors it keeps for its backward:

* "fla": fla-core's chunk_gla_fwd / chunk_gla_bwd (version 0.6.0, what its
  ChunkGLAFunction calls), keeping the gate's chunk-local cumulative sum
  and the intra-chunk attention A, as that Function does; "fla_pinned" the
  same with one kernel configuration per shape class (hamt/tuning.py).
* "reference": hamt.kernel.gla_reference and its adjoint recurrence
  written out: the CPU stand-in the tests run the op with.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from hamt.kernel import GLA, gla_reference
from hamt.tuning import pin_kernels

# A name of its own per copy of this module: an exported model's code
# (lib/model/remote/) holds a copy, which must not register the same op.
NAMESPACE = __name__.replace(".", "_")

Saved = tuple[Tensor, Tensor]


@dataclass(frozen=True)
class Implementation:
    """forward(q, k, v, g, initial_state, scale) -> (o, final, *saved);
    backward(q, k, v, g, initial_state, *saved, do, dfinal, scale) ->
    (dq, dk, dv, dg, dinitial); saved_like(q, v) -> empty tensors shaped
    as saved (for tracing)."""

    forward: Callable[..., tuple[Tensor, Tensor, Tensor, Tensor]]
    backward: Callable[..., tuple[Tensor, Tensor, Tensor, Tensor, Tensor | None]]
    saved_like: Callable[[Tensor, Tensor], Saved]


def _reference_forward(q, k, v, g, initial_state, scale):
    out, final = gla_reference(q, k, v, g, scale, initial_state, output_final_state=True)
    assert final is not None
    return out, final, q.new_empty(0), q.new_empty(0)


def _reference_backward(q, k, v, g, initial_state, _a, _b, do, dfinal, scale):
    # The recurrence's adjoint written out (autograd does not run inside a
    # custom op): with S_t = e^g_t S_{t-1} + k_t v_t^T and o_t = scale q_t^T S_t,
    # dS_t = scale q_t do_t^T + e^g_{t+1} dS_{t+1} (dS_T adds dfinal).
    work = torch.promote_types(v.dtype, torch.float32)
    q, k, v, g, do = (t.to(work) for t in (q, k, v, g, do))
    batch, length, heads, keys = q.shape
    state = (
        initial_state.to(work)
        if initial_state is not None
        else v.new_zeros(batch, heads, keys, v.size(-1), dtype=work)
    )
    states = [state]
    for t in range(length):
        states.append(
            g[:, t].exp().unsqueeze(-1) * states[-1] + k[:, t].unsqueeze(-1) * v[:, t].unsqueeze(-2)
        )
    grad_state = dfinal.to(work)
    dq, dk, dv, dg = (torch.zeros_like(t) for t in (q, k, v, g))
    for t in range(length - 1, -1, -1):
        grad_state = grad_state + scale * q[:, t].unsqueeze(-1) * do[:, t].unsqueeze(-2)
        dq[:, t] = scale * (states[t + 1] @ do[:, t].unsqueeze(-1)).squeeze(-1)
        dk[:, t] = (grad_state @ v[:, t].unsqueeze(-1)).squeeze(-1)
        dv[:, t] = (k[:, t].unsqueeze(-2) @ grad_state).squeeze(-2)
        decay = g[:, t].exp().unsqueeze(-1)
        dg[:, t] = (grad_state * decay * states[t]).sum(-1)
        grad_state = decay * grad_state
    dinitial = grad_state if initial_state is not None else None
    return dq, dk, dv, dg, dinitial


def _fla_chunk(length: int) -> int:
    # ChunkGLAFunction's choice: a power of two from 16 to 64.
    return min(64, max(16, 1 << max(length - 1, 0).bit_length()))


def _fla_forward(q, k, v, g, initial_state, scale, pinned=False):
    from fla.ops.gla.chunk import chunk_gla_fwd

    pin_kernels(pinned)  # before the first launch (the backward's kernels too)

    g_cumsum, attn, _, final, out = chunk_gla_fwd(
        q=q,
        k=k,
        v=v,
        g=g,
        g_cumsum=None,
        scale=scale,
        initial_state=initial_state,
        output_final_state=True,
        chunk_size=_fla_chunk(q.size(1)),
    )
    return out, final, g_cumsum, attn


def _fla_backward(q, k, v, g, initial_state, g_cumsum, attn, do, dfinal, scale):
    from fla.ops.gla.chunk import chunk_gla_bwd

    dq, dk, dv, dg, dinitial = chunk_gla_bwd(
        q=q,
        k=k,
        v=v,
        g=g,
        g_cumsum=g_cumsum,
        scale=scale,
        initial_state=initial_state,
        h=None,
        A=attn,
        do=do.contiguous(),
        dht=dfinal.contiguous(),
        chunk_size=_fla_chunk(q.size(1)),
    )
    return dq.to(q), dk.to(k), dv.to(v), dg, dinitial


def _fla_saved_like(q: Tensor, v: Tensor) -> Saved:
    batch, length, heads, _ = q.shape
    return (
        q.new_empty(q.shape, dtype=torch.float32),
        q.new_empty(batch, length, heads, _fla_chunk(length), dtype=torch.float32),
    )


def _fla_forward_pinned(q, k, v, g, initial_state, scale):
    return _fla_forward(q, k, v, g, initial_state, scale, pinned=True)


IMPLEMENTATIONS: dict[str, Implementation] = {
    "fla": Implementation(_fla_forward, _fla_backward, _fla_saved_like),
    # HAMT_KERNEL_PIN: one configuration per kernel and shape class (hamt/tuning.py)
    "fla_pinned": Implementation(_fla_forward_pinned, _fla_backward, _fla_saved_like),
    "reference": Implementation(
        _reference_forward, _reference_backward, lambda q, v: (q.new_empty(0), q.new_empty(0))
    ),
}


@torch.library.custom_op(f"{NAMESPACE}::gla_forward", mutates_args=())
def gla_forward(
    impl: str,
    q: Tensor,
    k: Tensor,
    v: Tensor,
    g: Tensor,
    initial_state: Tensor | None,
    scale: float,
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """(o, final state, saved, saved) of implementation impl."""
    out, final, *saved = IMPLEMENTATIONS[impl].forward(q, k, v, g, initial_state, scale)
    return out, final, saved[0], saved[1]


@gla_forward.register_fake
def _(impl, q, k, v, g, initial_state, scale):
    batch, length, heads, keys = q.shape
    out = v.new_empty(batch, length, heads, v.size(-1))
    work = torch.promote_types(v.dtype, torch.float32)  # float64 stays (tests)
    final = q.new_empty(batch, heads, keys, v.size(-1), dtype=work)
    return (out, final, *IMPLEMENTATIONS[impl].saved_like(q, v))


@torch.library.custom_op(f"{NAMESPACE}::gla_backward", mutates_args=())
def gla_backward(
    impl: str,
    q: Tensor,
    k: Tensor,
    v: Tensor,
    g: Tensor,
    initial_state: Tensor | None,
    saved_a: Tensor,
    saved_b: Tensor,
    do: Tensor,
    dfinal: Tensor,
    scale: float,
) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """Gradients of q, k, v, g and the initial state (empty without one)."""
    grads = IMPLEMENTATIONS[impl].backward(
        q, k, v, g, initial_state, saved_a, saved_b, do, dfinal, scale
    )
    dinitial = grads[4] if grads[4] is not None else q.new_empty(0)
    return grads[0], grads[1], grads[2], grads[3], dinitial


@gla_backward.register_fake
def _(impl, q, k, v, g, initial_state, saved_a, saved_b, do, dfinal, scale):
    dinitial = torch.empty_like(initial_state) if initial_state is not None else q.new_empty(0)
    return (
        torch.empty_like(q),
        torch.empty_like(k),
        torch.empty_like(v),
        torch.empty_like(g),
        dinitial,
    )


def _setup_context(ctx, inputs, output) -> None:
    impl, q, k, v, g, initial_state, scale = inputs
    ctx.impl, ctx.scale, ctx.has_initial = impl, scale, initial_state is not None
    first = initial_state if initial_state is not None else q.new_empty(0)
    ctx.save_for_backward(q, k, v, g, first, output[2], output[3])


def _backward(ctx, do, dfinal, _da, _db):
    q, k, v, g, first, saved_a, saved_b = ctx.saved_tensors
    do = torch.zeros_like(v) if do is None else do
    if dfinal is None:
        work = torch.promote_types(v.dtype, torch.float32)
        dfinal = q.new_zeros(q.size(0), q.size(2), q.size(3), v.size(-1), dtype=work)
    initial = first if ctx.has_initial else None
    dq, dk, dv, dg, dinitial = gla_backward(
        ctx.impl, q, k, v, g, initial, saved_a, saved_b, do, dfinal, ctx.scale
    )
    return None, dq, dk, dv, dg, (dinitial if ctx.has_initial else None), None


gla_forward.register_autograd(_backward, setup_context=_setup_context)


def as_gla(impl: str) -> GLA:
    """A function with chunk_gla's signature (hamt.kernel.GLA) running
    implementation impl through the custom op."""
    if impl not in IMPLEMENTATIONS:
        raise ValueError(f"impl={impl!r} is invalid: one of {', '.join(IMPLEMENTATIONS)}")

    def gla(
        q: Tensor,
        k: Tensor,
        v: Tensor,
        g: Tensor,
        scale: float | None = None,
        initial_state: Tensor | None = None,
        output_final_state: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        scale = q.size(-1) ** -0.5 if scale is None else scale
        out, final, _, _ = gla_forward(impl, q, k, v, g, initial_state, scale)
        return out, (final if output_final_state else None)

    return gla
