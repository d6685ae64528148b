"""Chunked parallel form of the decaying slot memory, for training.

Each slot s of a layer follows the linear recurrence

    M_s(t) = lambda_s * M_s(t-1) + g_{t,s} * B_t

(B_t the bound spectrum written at t, g the write gates), and the reader
with weights w_{t,s} sees sum_s w_{t,s} M_s(t). Split the sequence into
chunks of C tokens. Inside a chunk that read is

    sum_{tau <= t in chunk} [ sum_s w_{t,s} g_{tau,s} lambda_s^(t - tau) ] B_tau
    + sum_s w_{t,s} lambda_s^(t - start + 1) M_s(start - 1),

a causal C x C mixing matrix applied to the chunk's B's plus a read of the
slots as they were when the chunk began: two batched matmuls. Only the S
slot states travel between chunks (a loop over T / C chunks). Every power
of lambda has a non-negative exponent, so nothing overflows however small
a learned decay becomes (a "lambda^t * lambda^-tau" factorisation would).

Spectra are real rows of P numbers (packed, see spectral.py): the mixing
weights are real, so the scan is plain real arithmetic over P columns.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

# Below e^-60 a decayed contribution is negligible; flushing it to exactly 0
# keeps denormal floats (100x slower on many CPUs) out of the matmuls.
_LOG_FLOOR = -60.0


def decay_powers(log_decay: Tensor, exponents: Tensor) -> Tensor:
    """lambda_s ** e for e >= 0 (elsewhere 0): shape exponents.shape + [S]."""
    logs = exponents.clamp(min=0).unsqueeze(-1).to(log_decay) * log_decay
    keep = (exponents >= 0).unsqueeze(-1) & (logs > _LOG_FLOOR)
    return torch.exp(logs) * keep


def chunk_ends(length: int, chunk: int) -> list[int]:
    """Position of the last token of each chunk (the last chunk may be short)."""
    return [min(end, length) - 1 for end in range(chunk, length + chunk, chunk)]


def chunked_scan(
    bound: Tensor,
    gates: Tensor,
    readers: Tensor,
    log_decay: Tensor,
    chunk: int,
    state: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """Reads of the slot memory at every position, in parallel.

    bound [B, T, P]: what each token writes (the same for every slot).
    gates [B, T, S]: write gates. readers [B, T, S]: read weights.
    log_decay [S]. state [B, S, P]: slots before the first token (None:
    empty).

    Returns reads [B, T, P] (memory read after token t is written) and the
    slots after the last token of every chunk, [B, N, S, P] (positions
    chunk_ends(T, chunk)); the last of them is the final state.
    """
    batch, length, width = bound.shape
    slots = gates.size(-1)
    size = min(chunk, length)
    n_chunks = -(-length // size)
    pad = n_chunks * size - length
    if pad:  # zero gates and writes on the padding add nothing to any read
        bound, gates, readers = (F.pad(t, (0, 0, 0, pad)) for t in (bound, gates, readers))
    bound_c = bound.reshape(batch * n_chunks, size, width)
    gates_c = gates.reshape(batch * n_chunks, size, slots)
    readers_c = readers.reshape(batch * n_chunks, size, slots)

    pos = torch.arange(size, device=bound.device)
    lags = decay_powers(log_decay, pos.unsqueeze(1) - pos.unsqueeze(0))  # [C(i), C(j), S]
    # mix[i, j] = sum_s w[i, s] g[j, s] lambda_s^(i - j). A broadcast
    # multiply-and-sum beat every matmul arrangement of this (the factors
    # share the slot index s with the decay, so no plain GEMM fits).
    mix = (gates_c.unsqueeze(1) * lags * readers_c.unsqueeze(2)).sum(-1)  # [BN, C, C]

    starts, afters = _chunk_states(bound_c.view(batch, n_chunks, size, width),
                                   gates_c.view(batch, n_chunks, size, slots), log_decay,
                                   length, state)
    # A reader at chunk offset i sees the chunk's start state decayed i + 1 times.
    from_start = readers_c * decay_powers(log_decay, pos + 1)
    reads = (from_start @ starts.view(-1, slots, width)).baddbmm_(mix, bound_c)  # in place
    reads = reads.view(batch, n_chunks * size, width)
    return (reads[:, :length] if pad else reads), afters


def _chunk_states(bound_c: Tensor, gates_c: Tensor, log_decay: Tensor, length: int,
                  state: Tensor | None) -> tuple[Tensor, Tensor]:
    """Slots before each chunk and after each chunk's last real token,
    both [B, N, S, P]."""
    batch, n_chunks, size, width = bound_c.shape
    lens = torch.full((n_chunks,), size, device=bound_c.device)
    lens[-1] = length - (n_chunks - 1) * size
    pos = torch.arange(size, device=bound_c.device)
    # What each chunk leaves in the slots by its last token; padding has a
    # negative exponent, hence weight 0.
    to_end = gates_c * decay_powers(log_decay, lens.unsqueeze(1) - 1 - pos)  # [B, N, C, S]
    written = to_end.transpose(2, 3) @ bound_c  # [B, N, S, P]
    carry = decay_powers(log_decay, lens)  # lambda^len, [N, S]
    first = state if state is not None else bound_c.new_zeros(written[:, 0].shape)
    return ChunkRecurrence.apply(written, carry, first)


class ChunkRecurrence(torch.autograd.Function):
    """h_0 = first; h_{n+1} = carry_n * h_n + written_n (per slot).

    Returns starts = h_0 .. h_{N-1} and afters = h_1 .. h_N, each
    [B, N, S, P], as separate tensors so that neither gradient needs a
    zero-filled buffer of the other's size. A loop over chunks with a
    hand-written backward (the reverse loop): under plain autograd each of
    the T / C steps would add graph nodes and temporaries, which cost more
    than the arithmetic.
    """

    @staticmethod
    def forward(ctx, written: Tensor, carry: Tensor, first: Tensor) -> tuple[Tensor, Tensor]:
        afters = torch.empty_like(written)
        before = first
        # Views made once: indexing inside the loop costs more than the maths.
        steps = zip(written.unbind(1), carry.unsqueeze(-1).unbind(0), afters.unbind(1))
        for part, decay, after in steps:
            before = torch.addcmul(part, decay, before, out=after)
        starts = torch.cat((first.unsqueeze(1), afters[:, :-1]), dim=1)
        ctx.save_for_backward(carry, starts)
        return starts, afters

    @staticmethod
    def backward(ctx, grad_starts: Tensor, grad_afters: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        carry, starts = ctx.saved_tensors
        decay = carry.unsqueeze(-1).unbind(0)
        # grad[:, n]: the total gradient on h_{n+1} (= on written_n).
        grad = grad_afters.clone()
        grad[:, :-1] += grad_starts[:, 1:]
        parts = grad.unbind(1)
        for n in range(len(parts) - 1, 0, -1):
            parts[n - 1].addcmul_(decay[n], parts[n])
        grad_first = torch.addcmul(grad_starts[:, 0], decay[0], parts[0])
        grad_carry = (grad * starts).sum(dim=(0, 3))
        return grad, grad_carry, grad_first
