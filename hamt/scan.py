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
slot states travel between chunks (a loop over T / C chunks). The mixing
matrix is itself a matmul of decay-scaled gates and read weights, with
powers of lambda centred on the chunk's middle so that they stay far from
overflow; a slot that forgets too fast for that (lambda < 0.14 at C = 32)
switches the layer to a broadcast whose exponents are never negative (as
do accelerators and torch.compile, see mixing_matrix).

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
# Largest |exponent| of a decay factor in the factored mixing matrix: two
# such factors multiply to at most e^60, well inside float32 (e^88).
_FACTOR_LOG = 30.0


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
) -> tuple[Tensor, Tensor, Tensor]:
    """Reads of the slot memory at every position, in parallel.

    bound [B, T, P]: what each token writes (the same for every slot).
    gates [B, T, S]: write gates. readers [B, T, S]: read weights.
    log_decay [S]. state [B, S, P]: slots before the first token (None:
    empty).

    Returns reads [B, T, P] (memory read after token t is written), the
    slots after the last token of every chunk, [B, N, S, P] (positions
    chunk_ends(T, chunk)), the last of them the final state, and what
    those last tokens wrote, [B, N, P] (bound at chunk_ends, for the
    retrieval loss, taken without a gather whose gradient would be a
    zero-filled tensor of bound's size).
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
    mix = mixing_matrix(gates_c, readers_c, log_decay)  # [BN, C, C]

    starts, afters, lasts = _chunk_states(bound_c.view(batch, n_chunks, size, width),
                                          gates_c.view(batch, n_chunks, size, slots), log_decay,
                                          length, state)
    # A reader at chunk offset i sees the chunk's start state decayed i + 1 times.
    from_start = readers_c * decay_powers(log_decay, pos + 1)
    reads = (from_start @ starts.view(-1, slots, width)).baddbmm_(mix, bound_c)  # in place
    reads = reads.view(batch, n_chunks * size, width)
    return (reads[:, :length] if pad else reads), afters, lasts


def mixing_matrix(gates: Tensor, readers: Tensor, log_decay: Tensor) -> Tensor:
    """mix[n, i, j] = sum_s w[n, i, s] g[n, j, s] lambda_s^(i - j) for j <= i, else 0.

    gates, readers [BN, C, S] -> [BN, C, C]: factored_mix where every decay
    allows it, (C - 1) / 2 * |log lambda| <= _FACTOR_LOG (lambda >= 0.14
    per token at C = 32), else broadcast_mix. Both compute the same matrix.
    The check reads the decays on the host, so it runs on CPU tensors only:
    on an accelerator it would stall the queue of kernels each layer, and
    under torch.compile it would break the graph. There the broadcast is
    used (memory traffic is cheap on a GPU, and a compiler fuses its
    product and sum into one loop).
    """
    span = (gates.size(-2) - 1) / 2
    if gates.device.type != "cpu" or torch.compiler.is_compiling():
        return broadcast_mix(gates, readers, log_decay)
    if span * -float(log_decay.detach().min()) <= _FACTOR_LOG:
        return factored_mix(gates, readers, log_decay)
    return broadcast_mix(gates, readers, log_decay)


def factored_mix(gates: Tensor, readers: Tensor, log_decay: Tensor) -> Tensor:
    """The mixing matrix as one batched [C, S] x [S, C] matmul.

    Centred on the chunk's middle r, lambda^(i - j) = lambda^(i - r)
    lambda^(r - j), so the slot sum is a matrix product of w lambda^(i - r)
    and g lambda^(r - j), then masked to j <= i. The factors are at most
    e^_FACTOR_LOG only while (C - 1) / 2 * |log lambda| <= _FACTOR_LOG;
    past that they overflow, hence mixing_matrix's check.
    """
    size = gates.size(-2)
    offsets = torch.arange(size, device=gates.device).to(log_decay) - (size - 1) / 2
    centred = offsets.unsqueeze(-1) * log_decay  # (i - r) log lambda_s, [C, S]
    left = readers * torch.exp(centred)
    right = gates * torch.exp(-centred)
    return torch.tril(left @ right.transpose(-2, -1))


def broadcast_mix(gates: Tensor, readers: Tensor, log_decay: Tensor) -> Tensor:
    """The mixing matrix from a [BN, C, C, S] broadcast product summed over
    slots: C times the memory traffic of factored_mix, but every exponent
    is i - j >= 0, so any decay, however small, is safe."""
    pos = torch.arange(gates.size(-2), device=gates.device)
    lags = decay_powers(log_decay, pos.unsqueeze(1) - pos.unsqueeze(0))  # [C(i), C(j), S]
    return (gates.unsqueeze(1) * lags * readers.unsqueeze(2)).sum(-1)


def _chunk_states(bound_c: Tensor, gates_c: Tensor, log_decay: Tensor, length: int,
                  state: Tensor | None) -> tuple[Tensor, Tensor, Tensor]:
    """Slots before each chunk and after each chunk's last real token,
    both [B, N, S, P], and the item written at that token [B, N, P]."""
    batch, n_chunks, size, width = bound_c.shape
    lens = torch.full((n_chunks,), size, device=bound_c.device)
    lens[-1] = length - (n_chunks - 1) * size
    pos = torch.arange(size, device=bound_c.device)
    # What each chunk leaves in the slots by its last token; padding has a
    # negative exponent, hence weight 0.
    to_end = gates_c * decay_powers(log_decay, lens.unsqueeze(1) - 1 - pos)  # [B, N, C, S]
    # One more row selects the chunk's last real token: the same matmul
    # then also yields the item it wrote.
    last = (pos == lens.unsqueeze(1) - 1).to(to_end).expand(batch, -1, -1).unsqueeze(-1)
    writes = torch.cat((to_end, last), -1).transpose(2, 3) @ bound_c  # [B, N, S + 1, P]
    carry = decay_powers(log_decay, lens)  # lambda^len, [N, S]
    first = state if state is not None else bound_c.new_zeros(writes[:, 0, :-1].shape)
    return ChunkRecurrence.apply(writes, carry, first)


class ChunkRecurrence(torch.autograd.Function):
    """h_0 = first; h_{n+1} = carry_n * h_n + written_n (per slot).

    writes [B, N, S + 1, P]: written_n in rows 0..S-1; row S is an extra
    item per chunk, passed through as `lasts` [B, N, P].
    Returns starts = h_0 .. h_{N-1} and afters = h_1 .. h_N, each
    [B, N, S, P], as separate tensors so that neither gradient needs a
    zero-filled buffer of the other's size, and lasts. A loop over chunks
    with a hand-written backward (the reverse loop): under plain autograd
    each of the T / C steps would add graph nodes and temporaries, which
    cost more than the arithmetic.
    """

    @staticmethod
    def forward(ctx, writes: Tensor, carry: Tensor,
                first: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        written = writes[:, :, :-1]
        afters = torch.empty_like(written)
        before = first
        # Views made once: indexing inside the loop costs more than the maths.
        steps = zip(written.unbind(1), carry.unsqueeze(-1).unbind(0), afters.unbind(1))
        for part, decay, after in steps:
            before = torch.addcmul(part, decay, before, out=after)
        starts = torch.cat((first.unsqueeze(1), afters[:, :-1]), dim=1)
        ctx.save_for_backward(carry, starts)
        return starts, afters, writes[:, :, -1].clone()

    @staticmethod
    def backward(ctx, grad_starts: Tensor, grad_afters: Tensor,
                 grad_lasts: Tensor | None) -> tuple[Tensor, Tensor, Tensor]:
        carry, starts = ctx.saved_tensors
        decay = carry.unsqueeze(-1).unbind(0)
        grad_writes = grad_afters.new_empty(starts.shape[:2] + (starts.size(2) + 1,)
                                            + starts.shape[3:])
        if grad_lasts is None:
            grad_writes[:, :, -1].zero_()
        else:
            grad_writes[:, :, -1].copy_(grad_lasts)
        # grad[:, n]: the total gradient on h_{n+1} (= on written_n).
        grad = grad_writes[:, :, :-1].copy_(grad_afters)
        grad[:, :-1] += grad_starts[:, 1:]
        parts = grad.unbind(1)
        for n in range(len(parts) - 1, 0, -1):
            parts[n - 1].addcmul_(decay[n], parts[n])
        grad_first = torch.addcmul(grad_starts[:, 0], decay[0], parts[0])
        grad_carry = (grad * starts).sum(dim=(0, 3))
        return grad_writes, grad_carry, grad_first
