"""The LM head and its cross-entropy in one step, without the [B, T, V] logits.

A small model's largest activation is its logits: GPT-2 124M at batch 16 x
1024 holds 16384 x 50304 of them (1.6 GB in bf16, twice that once upcast for
the softmax), more than all its blocks' activations. Two implementations
compute the mean cross-entropy of hidden @ weight.T against the targets while
holding only a few rows of logits at a time (TRAIN_LOSS_IMPL):

* "chunked" (any device, plain torch): rows in chunks of about as many
  logits as the hidden states hold; each chunk's logits -> log-sum-exp ->
  loss, and at once the gradients with respect to the chunk's hidden rows and
  to the weight (softmax minus one-hot, times the weight / the hidden). Those
  gradients are stored and scaled by the incoming gradient in backward, so no
  logits are recomputed and the FLOPs equal the plain path's (one forward,
  two backward matmuls). Liger Kernel's fused linear cross-entropy
  (Hsu et al. 2024, arXiv:2410.10989) is the same scheme with Triton kernels.
* "liger": that Triton implementation, CUDA only (the `liger-kernel` package).
* "plain": lm_head(x) then F.cross_entropy, as before.

The numerics follow the plain path: the matmul runs in the autocast dtype
(so its logits are rounded as lm_head's are), the softmax in fp32. The
chunked path accumulates the gradients in fp32 and divides by the number of
targets last, so under fp16 small probabilities do not underflow before the
GradScaler's scale is applied. Padded vocabulary rows (GPT2_PAD_VOCAB) take
part in the softmax exactly as in the plain path: they are never targets and
training drives their logits down. Targets equal to IGNORE_INDEX count
neither in the loss nor in its mean.
"""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

IGNORE_INDEX = -1  # what the loaders and evaluations mark as "no target"
LOSS_IMPLS = ("plain", "chunked", "liger")


MIN_CHUNK_ROWS = 1024
# On a CPU, a chunk of fewer logits than this is mostly per-chunk overhead.
MIN_CPU_CHUNK_LOGITS = 1 << 20


def _pow2_at_least(n: int) -> int:
    return 1 << max(0, n - 1).bit_length()


def chunk_rows(rows: int, width: int, vocab: int, device_type: str = "cuda") -> int:
    """Rows per chunk, a power of two (or all rows).

    On a GPU: about as many logits as the hidden states have values (rows x
    width; Liger's rule), but at least MIN_CHUNK_ROWS: each chunk adds its
    rank-`rows` product into the whole [V, C] weight gradient, which narrow
    chunks make memory-bound.

    On a CPU: at least `width` rows, so a chunk's logits are about as large
    as the weight, and at least MIN_CPU_CHUNK_LOGITS logits. The softmax and
    both gradient products then read a chunk's logits from the cache the head
    product wrote them to, while the weight gradient's traffic per chunk stays
    of the same size; a small vocabulary keeps one chunk. Measured against
    Plain in docs/benchmarks.md ("The head's cross-entropy on a CPU")."""
    if device_type == "cpu":
        return max(1, min(_pow2_at_least(max(width, MIN_CPU_CHUNK_LOGITS // vocab)), rows))
    chunks = max(1, math.ceil(vocab / width))
    size = _pow2_at_least(math.ceil(rows / chunks))
    return max(1, min(max(size, MIN_CHUNK_ROWS), rows))


def _compute_dtype(device: torch.device, fallback: torch.dtype) -> torch.dtype:
    if torch.is_autocast_enabled(device.type):
        return torch.get_autocast_dtype(device.type)
    return fallback


class _ChunkedLinearCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx: Any, hidden: Tensor, weight: Tensor, targets: Tensor, rows: int, dtype: torch.dtype
    ) -> Tensor:
        want_h, want_w = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        n = hidden.shape[0]
        valid = targets != IGNORE_INDEX
        count = valid.sum()
        w = weight.to(dtype)
        loss = torch.zeros((), dtype=torch.float32, device=hidden.device)
        grad_h = (
            torch.empty(hidden.shape, dtype=torch.float32, device=hidden.device) if want_h else None
        )
        grad_w = (
            torch.zeros(weight.shape, dtype=torch.float32, device=weight.device) if want_w else None
        )
        for start in range(0, n, rows):
            end = min(start + rows, n)
            h = hidden[start:end].to(dtype)
            ok = valid[start:end]
            target = torch.where(ok, targets[start:end], 0)
            logits = (h @ w.t()).float()  # rounded to the compute dtype, as lm_head's
            lse = torch.logsumexp(logits, dim=-1)
            picked = logits.gather(1, target[:, None]).squeeze(1)
            loss = loss + torch.where(ok, lse - picked, 0.0).sum()
            if grad_h is None and grad_w is None:
                continue
            # d(sum of losses)/d(logits) = softmax - one-hot, computed in place over
            # the logits so the chunk holds one [rows, V] buffer. Ignored rows are
            # zeroed on the narrow side (their hidden rows and gradients), not here.
            grad = logits.sub_(lse[:, None]).exp_()
            grad.scatter_add_(1, target[:, None], torch.full_like(picked[:, None], -1.0))
            g = grad.to(dtype)
            keep = ok[:, None].to(dtype)
            if grad_h is not None:
                grad_h[start:end] = (g @ w).float() * keep
            if grad_w is not None:
                if dtype == torch.float32:
                    grad_w.addmm_(g.t(), h * keep)
                else:
                    grad_w.add_((g.t() @ (h * keep)).float())
        scale = 1.0 / count.float()  # nan when every target is ignored, as F.cross_entropy
        for grad_sum in (grad_h, grad_w):
            if grad_sum is not None:
                grad_sum.mul_(scale)
        ctx.save_for_backward(grad_h, grad_w)
        ctx.dtypes = (hidden.dtype, weight.dtype)
        return loss * scale

    @staticmethod
    def backward(ctx: Any, grad_out: Tensor) -> tuple[Tensor | None, ...]:
        grad_h, grad_w = ctx.saved_tensors
        dh = None if grad_h is None else (grad_h * grad_out).to(ctx.dtypes[0])
        dw = None if grad_w is None else (grad_w * grad_out).to(ctx.dtypes[1])
        return dh, dw, None, None, None


def chunked_linear_cross_entropy(
    hidden: Tensor, weight: Tensor, targets: Tensor, rows: int | None = None
) -> Tensor:
    """Mean cross-entropy of hidden [..., C] @ weight[V, C].T against targets
    [...] (IGNORE_INDEX skipped), never holding more than `rows` rows of
    logits (default chunk_rows)."""
    h = hidden.reshape(-1, hidden.shape[-1])
    t = targets.reshape(-1)
    if rows is None:
        rows = chunk_rows(h.shape[0], h.shape[1], weight.shape[0], h.device.type)
    dtype = _compute_dtype(h.device, weight.dtype)
    # The matmuls run in the autocast dtype chosen here; autocast itself is
    # off inside, so it does not re-cast what this function casts explicitly.
    with torch.autocast(h.device.type, enabled=False):
        loss = _ChunkedLinearCrossEntropy.apply(h, weight, t, rows, dtype)
    return loss


def plain_linear_cross_entropy(hidden: Tensor, weight: Tensor, targets: Tensor) -> Tensor:
    """The reference: full logits, then F.cross_entropy (what lm_head does)."""
    logits = torch.nn.functional.linear(hidden, weight)
    return torch.nn.functional.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=IGNORE_INDEX
    )


def liger_available() -> bool:
    """Whether Liger Kernel (and the Triton it needs) is installed; it is
    imported only when used, since importing it imports Triton."""
    return (
        importlib.util.find_spec("liger_kernel") is not None
        and importlib.util.find_spec("triton") is not None
    )


def liger_linear_cross_entropy() -> Callable[[Tensor, Tensor, Tensor], Tensor]:
    """Liger Kernel's fused linear cross-entropy as f(hidden, weight, targets)."""
    from liger_kernel.transformers import LigerFusedLinearCrossEntropyLoss

    fused = LigerFusedLinearCrossEntropyLoss(ignore_index=IGNORE_INDEX)

    def loss(hidden: Tensor, weight: Tensor, targets: Tensor) -> Tensor:
        return fused(weight, hidden.reshape(-1, hidden.shape[-1]), targets.reshape(-1))

    return loss


def resolve_loss_impl(choice: str, device: torch.device) -> tuple[str, str]:
    """TRAIN_LOSS_IMPL -> (implementation that runs, why). Auto takes Liger on
    CUDA when installed, the chunked path otherwise; an explicit "liger"
    without CUDA or without the package is an error, not a silent swap."""
    if choice == "auto":
        if device.type == "cuda" and liger_available():
            return "liger", "auto: CUDA and liger-kernel installed"
        why = "no CUDA device" if device.type != "cuda" else "liger-kernel is not installed"
        return "chunked", f"auto: {why}, the chunked torch implementation"
    if choice == "liger":
        if device.type != "cuda":
            raise RuntimeError(
                f"CONFIG_TRAIN_LOSS_IMPL_LIGER needs a CUDA GPU (Liger Kernel is "
                f"Triton code), this run is on {device.type}; choose chunked or "
                f"auto (TRAIN_LOSS_IMPL)"
            )
        if not liger_available():
            raise RuntimeError(
                "CONFIG_TRAIN_LOSS_IMPL_LIGER is set but liger-kernel (with triton) "
                "is not installed: pip install liger-kernel, or choose chunked"
            )
        return "liger", "as configured"
    if choice not in LOSS_IMPLS:
        raise ValueError(
            f"unknown loss implementation {choice!r}; one of auto, {', '.join(LOSS_IMPLS)}"
        )
    return choice, "as configured"


def head_loss(impl: str) -> Callable[[Tensor, Tensor, Tensor], Tensor] | None:
    """f(hidden, weight, targets) -> mean loss for a resolved implementation;
    None for "plain" (the model computes its logits as before)."""
    if impl == "plain":
        return None
    if impl == "chunked":
        return chunked_linear_cross_entropy
    if impl == "liger":
        return liger_linear_cross_entropy()
    raise ValueError(f"unknown loss implementation {impl!r}")
