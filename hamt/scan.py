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

A slot may also tick more rarely than every token (the hierarchical slow
bank, hamt/memory.py): it then decays and takes a write only at its ticks
and holds still in between. The exponents above become tick counts,
lambda_s^(ticks of s in (tau, t]), and the gates are 0 between ticks; the
matrices keep their form (clock= of chunked_scan).

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
    """lambda_s ** e for e >= 0 (elsewhere 0). exponents broadcast against
    log_decay [S] along their last dimension ([..., 1] or [..., S])."""
    logs = exponents.clamp(min=0).to(log_decay) * log_decay
    keep = (exponents >= 0) & (logs > _LOG_FLOOR)
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
    clock: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """Reads of the slot memory at every position, in parallel.

    bound [B, T, P]: what each token writes (the same for every slot).
    gates [B, T, S]: write gates. readers [B, T, S]: read weights.
    log_decay [S]. state [B, S, P]: slots before the first token (None:
    empty). clock [T, S]: ticks of each slot from before the first token
    through token t (None: every slot ticks at every token, clock[t] =
    t + 1). A slot decays once per tick; where its clock does not advance
    its gate must be 0 (HolographicMemory zeroes it), so it holds still.

    Returns reads [B, T, P] (memory read after token t is written) and the
    slots after the last token of every chunk, [B, N, S, P] (positions
    chunk_ends(T, chunk)), the last of them the final state.
    """
    batch, length, width = bound.shape
    slots = gates.size(-1)
    size = min(chunk, length)
    n_chunks = -(-length // size)
    pad = n_chunks * size - length
    if pad:  # zero gates and writes on the padding add nothing to any read
        bound, gates, readers = (F.pad(t, (0, 0, 0, pad)) for t in (bound, gates, readers))
    bound_c = bound.reshape(batch, n_chunks, size, width)
    gates_c = gates.reshape(batch, n_chunks, size, slots)
    readers_c = readers.reshape(batch, n_chunks, size, slots)

    ticks, ends = chunk_ticks(clock, n_chunks, size, length, log_decay)
    mix = mixing_matrix(gates_c, readers_c, log_decay, ticks)  # [B, N, C, C]
    starts, afters = _chunk_states(bound_c, gates_c, log_decay, ticks, ends, state)
    # A reader at chunk offset i sees the chunk's start state decayed by the
    # ticks up to i (i + 1 of them when every token ticks).
    from_start = readers_c * decay_powers(log_decay, ticks)
    flat = batch * n_chunks
    reads = (from_start.view(flat, size, slots) @ starts.view(flat, slots, width)).baddbmm_(
        mix.view(flat, size, size), bound_c.view(flat, size, width)
    )  # in place
    reads = reads.view(batch, n_chunks * size, width)
    return (reads[:, :length] if pad else reads), afters


def chunk_end_reads(
    bound: Tensor,
    gates: Tensor,
    weights: Tensor,
    log_decay: Tensor,
    chunk: int,
    state: Tensor | None = None,
    clock: Tensor | None = None,
) -> Tensor:
    """The slots after each chunk's last token read with weights [B, N, S]:
    sum_s weights[:, n, s] M_s(chunk_ends[n]), [B, N, P], as chunked_scan's
    afters would give them, without the loop over chunks or the states.

    What chunk m leaves in the slots by its end, W_m = its decayed writes
    [B, N, S, P], reaches the end of chunk n >= m decayed by lambda to the
    ticks in chunks m+1..n: exp(L_n - L_m) with L_n the cumulative log-decay
    through chunk n. So the reads are one [N, N x S] x [N x S, P] matmul per
    row (for the GLA kernel, which returns no intermediate states: a second
    query head would run the whole kernel again, hamt/kernel.py). Arguments
    as chunked_scan's.
    """
    batch, length, width = bound.shape
    slots = gates.size(-1)
    size = min(chunk, length)
    n_chunks = -(-length // size)
    pad = n_chunks * size - length
    if pad:
        bound, gates = (F.pad(t, (0, 0, 0, pad)) for t in (bound, gates))
    bound_c = bound.reshape(batch, n_chunks, size, width)
    gates_c = gates.reshape(batch, n_chunks, size, slots)
    ticks, ends = chunk_ticks(clock, n_chunks, size, length, log_decay)
    to_end = gates_c * decay_powers(log_decay, ends.unsqueeze(-2) - ticks)  # [B, N, C, S]
    written = to_end.transpose(2, 3) @ bound_c  # [B, N, S, P]
    cumulative = torch.cumsum(ends * log_decay, 0)  # [N, S]
    lag = cumulative.unsqueeze(1) - cumulative.unsqueeze(0)  # [N (n), N (m), S]
    later = torch.ones(n_chunks, n_chunks, dtype=torch.bool, device=bound.device).tril()
    keep = later.unsqueeze(-1) & (lag > _LOG_FLOOR)
    decay = torch.exp(torch.where(keep, lag, 0.0)) * keep
    mix = (weights.unsqueeze(2) * decay).flatten(2)  # [B, N, N x S]
    reads = mix @ written.flatten(1, 2)
    if state is not None:
        from_first = torch.exp(cumulative) * (cumulative > _LOG_FLOOR)  # [N, S]
        reads = reads + (weights * from_first) @ state
    return reads


def chunk_ticks(
    clock: Tensor | None, n_chunks: int, size: int, length: int, like: Tensor
) -> tuple[Tensor, Tensor]:
    """Ticks from each chunk's start through offset i, [N or 1, C, S or 1],
    and through the chunk's last real token, [N, S or 1], in like's dtype.

    Without a clock every token ticks: i + 1 for every chunk, and the
    chunk's length at its end (so padding lies past the end: a negative
    exponent, weight 0). With one, the padding repeats the last tick count.
    """
    if clock is None:
        ticks = per_token_ticks(size, like).unsqueeze(0)
        ends = torch.full((n_chunks, 1), size, device=like.device).to(like)
        ends[-1] = length - (n_chunks - 1) * size
        return ticks, ends
    clock = clock.to(like)
    if n_chunks * size > length:
        clock = torch.cat((clock, clock[-1:].expand(n_chunks * size - length, -1)))
    clock = clock.view(n_chunks, size, -1)
    before = F.pad(clock[:-1, -1], (0, 0, 1, 0)).unsqueeze(1)  # at each chunk's start
    ticks = clock - before
    return ticks, ticks[:, -1]


def per_token_ticks(size: int, like: Tensor) -> Tensor:
    """[C, 1]: i + 1 ticks by chunk offset i when every token ticks."""
    return torch.arange(1, size + 1, device=like.device).to(like).unsqueeze(-1)


def mixing_matrix(
    gates: Tensor, readers: Tensor, log_decay: Tensor, ticks: Tensor | None = None
) -> Tensor:
    """mix[..., i, j] = sum_s w[i, s] g[j, s] lambda_s^(ticks[i, s] - ticks[j, s])
    for j <= i, else 0.

    gates, readers [..., C, S]; ticks [..., C, S or 1] (None: i + 1, every
    token ticks) -> [..., C, C]: factored_mix where every decay allows it,
    span_s * |log lambda_s| <= _FACTOR_LOG with span_s half a chunk's ticks
    of slot s (per token: lambda >= 0.14 at C = 32), else broadcast_mix.
    Both compute the same matrix. The check reads the decays on the host,
    so it runs on CPU tensors only: on an accelerator it would stall the
    queue of kernels each layer, and under torch.compile it would break the
    graph. There the broadcast is used (memory traffic is cheap on a GPU,
    and a compiler fuses its product and sum into one loop).
    """
    if ticks is None:
        ticks = per_token_ticks(gates.size(-2), log_decay)
    if gates.device.type != "cpu" or torch.compiler.is_compiling():
        return broadcast_mix(gates, readers, log_decay, ticks)
    span = (ticks[..., -1, :] - ticks[..., 0, :]).reshape(-1, ticks.size(-1)).amax(0) / 2
    if float((span * -log_decay.detach()).max()) <= _FACTOR_LOG:
        return factored_mix(gates, readers, log_decay, ticks)
    return broadcast_mix(gates, readers, log_decay, ticks)


def factored_mix(
    gates: Tensor, readers: Tensor, log_decay: Tensor, ticks: Tensor | None = None
) -> Tensor:
    """The mixing matrix as one batched [C, S] x [S, C] matmul.

    Centred on the chunk's middle tick count r, lambda^(n_i - n_j) =
    lambda^(n_i - r) lambda^(r - n_j), so the slot sum is a matrix product
    of w lambda^(n_i - r) and g lambda^(r - n_j), then masked to j <= i.
    The factors are at most e^_FACTOR_LOG only while half a chunk's ticks
    times |log lambda| stays within _FACTOR_LOG; past that they overflow,
    hence mixing_matrix's check.
    """
    ticks = per_token_ticks(gates.size(-2), log_decay) if ticks is None else ticks
    middle = (ticks[..., :1, :] + ticks[..., -1:, :]) / 2
    centred = (ticks - middle) * log_decay  # (n_i - r) log lambda_s, [..., C, S]
    left = readers * torch.exp(centred)
    right = gates * torch.exp(-centred)
    return torch.tril(left @ right.transpose(-2, -1))


def broadcast_mix(
    gates: Tensor, readers: Tensor, log_decay: Tensor, ticks: Tensor | None = None
) -> Tensor:
    """The mixing matrix from a [..., C, C, S] broadcast product summed over
    slots: C times the memory traffic of factored_mix, but every exponent
    is a tick count >= 0, so any decay, however small, is safe."""
    size = gates.size(-2)
    ticks = per_token_ticks(size, log_decay) if ticks is None else ticks
    later = torch.ones(size, size, dtype=torch.bool, device=gates.device).tril().unsqueeze(-1)
    lags = torch.where(later, ticks.unsqueeze(-2) - ticks.unsqueeze(-3), -1)  # [.., C(i), C(j), S]
    return (gates.unsqueeze(-3) * decay_powers(log_decay, lags) * readers.unsqueeze(-2)).sum(-1)


def _chunk_states(
    bound_c: Tensor,
    gates_c: Tensor,
    log_decay: Tensor,
    ticks: Tensor,
    ends: Tensor,
    state: Tensor | None,
) -> tuple[Tensor, Tensor]:
    """Slots before each chunk and after each chunk's last real token,
    both [B, N, S, P]."""
    # What each chunk leaves in the slots by its last token.
    to_end = gates_c * decay_powers(log_decay, ends.unsqueeze(-2) - ticks)  # [B, N, C, S]
    written = to_end.transpose(2, 3) @ bound_c  # [B, N, S, P]
    carry = decay_powers(log_decay, ends)  # lambda^(ticks in the chunk), [N, S]
    first = state if state is not None else bound_c.new_zeros(written[:, 0].shape)
    return ChunkRecurrence.apply(written, carry, first)


class ChunkRecurrence(torch.autograd.Function):
    """h_0 = first; h_{n+1} = carry_n * h_n + written_n (per slot).

    written [B, N, S, P]. Returns starts = h_0 .. h_{N-1} and afters =
    h_1 .. h_N, each [B, N, S, P], as separate tensors so that neither
    gradient needs a zero-filled buffer of the other's size. A loop over
    chunks with a hand-written backward (the reverse loop): under plain
    autograd each of the T / C steps would add graph nodes and temporaries,
    which cost more than the arithmetic.
    """

    @staticmethod
    def forward(ctx, written: Tensor, carry: Tensor, first: Tensor) -> tuple[Tensor, Tensor]:
        states = [first]
        # Views made once: indexing inside the loop costs more than the maths.
        # No out= into afters' slices: torch.compile cannot trace writes into
        # non-contiguous views (a graph break per layer).
        for part, decay in zip(written.unbind(1), carry.unsqueeze(-1).unbind(0)):
            states.append(torch.addcmul(part, decay, states[-1]))
        afters = torch.stack(states[1:], dim=1)
        starts = torch.stack(states[:-1], dim=1)
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
