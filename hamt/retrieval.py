"""HAMT's retrieval auxiliary loss: can the memory give back an earlier item?

At a query position t (the last token of each scan chunk, where the scan
has every slot's state at hand) and a source position tau = t - lag, with
lag drawn uniformly from 1 .. min(aux_max_lag, t) per row and query:

    retrieved = unbind(a_tau, sum_s p_s M_s(t)),  p_s = g'_{tau,s} / sum_s g'_{tau,s}
    loss      = 1 - cosine(retrieved, v_tau), averaged over rows and queries

a_tau and v_tau are the write key and value of token tau, M_s(t) slot s
after token t is written, g'_tau tau's write gates (0 for a slow slot that
did not tick at tau: the item never reached it). So the loss asks for the
item written lag tokens ago, read from where it was written with the key it
was written under, out of the memory as it is now, after lag more writes
and decays. The target (a_tau and v_tau, i.e. the bound item
bind(a_tau, v_tau)) is detached: gradients reach the memory state (every
write in between, the gates, the decays) and the slot weights p, so the loss
cannot be lowered by moving the target towards the memory. Cosine rather
than MSE because MSE could be lowered by merely shrinking the values.

The window: lag <= aux_max_lag (HAMT_AUX_MAX_LAG) and lag <= t, the tokens
this forward pass has written before t (a state carried in from an earlier
call is never a target). A query with no earlier token (t = 0) is skipped.
It is fixed, not derived from the learned decays, which would let faster
forgetting shrink it. Retrieval of an item lag tokens old degrades as the
decays fall, so this loss does not reward forgetting; the loss it replaces
scored lag 0 (the token just written, with a target that kept its gradient)
and fell towards 0 as every decay went to 0 (tests/hamt/test_hamt_retrieval.py).

Because a_tau is unit, unbinding is an isometry, <unbind(a, U), v> =
<U, bind(a, v)> and |unbind(a, U)| = |U|, so the cosine is taken between the
packed spectra U and the bound item B_tau the scan wrote: no FFT, no unbind.

Randomness: training draws lags from torch's default generator on the
activations' device, whose state the trainer saves with every checkpoint
(lib/run/checkpoint.py), so a resumed run draws the same lags. In eval mode the
lags come from a generator seeded with 0: the loss is reproducible and the
training stream is left untouched by evaluation.
"""

from __future__ import annotations

import torch
from torch import Tensor

from hamt.scan import chunk_ends

_EVAL_SEED = 0


def sample_sources(
    length: int, chunk: int, batch: int, max_lag: int, training: bool, device: torch.device
) -> Tensor:
    """Source positions tau [B, N] for the queries at chunk_ends(length, chunk):
    t - lag with lag uniform in 1 .. min(max_lag, t); -1 where t = 0."""
    ends = torch.tensor(chunk_ends(length, chunk), device=device)
    window = ends.clamp(max=max_lag)
    if training:
        draws = torch.rand(batch, ends.numel(), device=device)
    else:
        generator = torch.Generator().manual_seed(_EVAL_SEED)
        draws = torch.rand(batch, ends.numel(), generator=generator).to(device)
    lags = (draws * window).floor().long() + 1  # draws < 1, so lag <= window
    return torch.where(window > 0, ends - lags, -1)


def retrieval_loss(
    afters: Tensor, bound: Tensor, gates: Tensor, sources: Tensor, parseval: Tensor
) -> Tensor:
    """Mean 1 - cosine(retrieved, target) over the queries with a source.

    afters [B, N, S, P]: the slots after each chunk's last token.
    bound [B, T, P]: the bound item each token wrote (packed spectra).
    gates [B, T, S]: the write gates as applied (0 where a slot did not tick).
    sources [B, N]: the position whose item query n retrieves; < 0: none.
    parseval [P]: the weights that make packed spectra's sums of squares
    the vectors' (hamt/memory.py), so the cosine is the vectors' cosine.
    """
    target, weights, valid = retrieval_queries(bound, gates, sources)
    retrieved = (weights.unsqueeze(-2) @ afters).squeeze(-2)  # [B, N, P]
    return retrieval_cosine_loss(retrieved, target, valid, parseval)


def retrieval_queries(
    bound: Tensor, gates: Tensor, sources: Tensor
) -> tuple[Tensor, Tensor, Tensor]:
    """Per query: the target item [B, N, P] (detached), the slot weights p
    [B, N, S] to read the slots with, and whether it has a source [B, N].
    Apart from retrieval_loss, so that a scan returning no chunk states (the
    GLA kernel, hamt/kernel.py) can read with p itself."""
    rows = torch.arange(bound.size(0), device=bound.device).unsqueeze(1)
    at = sources.clamp(min=0)
    target = bound.detach()[rows, at]  # [B, N, P], no gradient buffer of bound's size
    weights = gates[rows, at]  # [B, N, S]
    written = weights.sum(-1, keepdim=True)
    # An item no slot took (adaptive top-k routed it only to slow slots that
    # did not tick) cannot be retrieved: no query.
    valid = (sources >= 0) & (written.squeeze(-1) > 0)
    return target, weights / (written + 1e-6), valid


def retrieval_cosine_loss(
    retrieved: Tensor, target: Tensor, valid: Tensor, parseval: Tensor
) -> Tensor:
    """Mean over valid queries of 1 - the Parseval-weighted cosine."""
    dot = (retrieved * target * parseval).sum(-1)
    norms = (retrieved.square() * parseval).sum(-1) * (target.square() * parseval).sum(-1)
    # sqrt's gradient at 0 is infinite: a query reading empty slots would
    # turn every gradient NaN, even masked out below.
    norms = norms.clamp_min(1e-16).sqrt()
    cosine = dot / (norms + 1e-8)
    # No host-side test for "no valid query": that would stall an accelerator.
    return ((1 - cosine) * valid).sum() / valid.sum().clamp(min=1)
