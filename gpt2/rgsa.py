"""Retrieval-gated sparse attention (RGSA), as the original project trains it.

Reference: mcgrof/knlp gpt2/rgsa.py at 041ec5f2 (GPT2_RGSA, built by
gpt2/trainers/vanilla.py when ENABLE_RGSA=y). This is a transcription of what
that code computes, not of its text.

Idea (after Meta's REGRAG): split the context into chunks of chunk_size
tokens, summarise each chunk by a small routing embedding (the mean of its
hidden states, projected to routing_dim), and let every query pick the top_b
chunks whose embeddings are most similar (cosine) to its own projection;
attention would then cover a local window of local_window tokens plus the
chosen chunks.

What the reference runs ("Phase 1" in its code): the routing is computed in
every forward pass, but the attention itself stays dense causal SDPA, so the
layer's output is vanilla attention's exactly; its sparse path
(_sparse_attention) is never called, and its routing loss is a zero
placeholder the trainer never adds. The router's parameters exist (one chunk
router shared by all layers, a query projection per layer) and never receive
a gradient, so they keep their initial values; here they are frozen
(requires_grad False: the same values, and DDP does not wait for gradients
that never come). The routing of a query is not causal (a chunk's mean
includes tokens after the query), which is harmless only because it never
reaches the output. This module does the same: `forward` is vanilla
attention plus the routing, kept for the routing metrics (GPT2.aux_metrics):
rgsa_entropy, the mean entropy of softmax(routing scores) over the chunks
divided by log(chunks), rgsa_balance, 1 - the coefficient of variation of
how often each chunk is picked (the reference's load-balance score), and
rgsa_chunk, the effective chunk size; all from layer 0 of the last forward.

Routing runs only when T > local_window + chunk (the reference's condition)
and not with routing "dense" (its RGSA_DENSE_MODE ablation: router kept,
routing skipped). "random" picks chunks uniformly at random (its
RGSA_RANDOM_ROUTING ablation). route_stride > 0 routes mean-pooled blocks of
that many queries once each; cache_routing_layers N > 0 computes the chunk
embeddings at layers 0, N, 2N... and reuses them in between. One difference:
the reference takes those cached embeddings from the residual stream before
the block's LayerNorm, this module from the attention's input after it (the
layers here do not see the residual); routing never reaches the output, so
what is trained is the same, only the metrics of such a run can differ.
With dynamic chunking the chunk size follows the sequence length (power:
round(T^alpha), piecewise: the first "threshold:size" with T <= threshold,
else chunk_size_max), clamped to [min, max] and rounded (pow2, multiple_of_8
or nearest), as the reference's compute_chunk_size.

Cache: the output is vanilla attention's, so is the generation cache; a
cached step skips the routing (it changes nothing there).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from gpt2.attention import AttentionLayers, CausalSelfAttention, KVCache, kv_cache_width
from gpt2.config import GPT2Config


def nearest_pow2(x: int) -> int:
    """The power of two nearest x, the lower one on a tie (x >= 1)."""
    if x <= 1:
        return 1
    low = 1 << (x.bit_length() - 1)
    high = low << 1
    return low if x - low <= high - x else high


def piecewise_size(seq_len: int, spec: str, default: int) -> int:
    """The size of the first "threshold:size" entry with seq_len <= threshold."""
    for entry in filter(None, (e.strip() for e in spec.split(","))):
        threshold, size = entry.split(":", 1)
        if seq_len <= int(threshold):
            return int(size)
    return default


def chunk_size(seq_len: int, cfg: GPT2Config) -> int:
    """The chunk size routing uses for a sequence of seq_len tokens."""
    if not cfg.rgsa_dynamic_chunking:
        return cfg.rgsa_chunk_size
    low, high = cfg.rgsa_chunk_size_min, cfg.rgsa_chunk_size_max
    if cfg.rgsa_chunk_schedule == "power":
        raw = int(round(seq_len**cfg.rgsa_chunk_size_alpha))
    else:
        raw = piecewise_size(seq_len, cfg.rgsa_chunk_piecewise, high)
    size = max(low, min(raw, high))
    if cfg.rgsa_chunk_rounding == "pow2":
        size = nearest_pow2(size)
    elif cfg.rgsa_chunk_rounding == "multiple_of_8":
        size = max(8, round(size / 8) * 8)
    return max(1, size)


class ChunkRouter(nn.Module):
    """Chunk routing embeddings: each chunk's mean hidden state, projected.
    The last chunk is zero-padded and still divided by the full chunk size,
    as the reference pads before it averages."""

    def __init__(self, config: GPT2Config) -> None:
        super().__init__()
        self.proj = nn.Linear(config.n_embd, config.rgsa_routing_dim, bias=config.bias)
        self.requires_grad_(False)  # routing never reaches the loss (module docstring)

    def forward(self, x: Tensor, chunk: int) -> Tensor:
        """x: [B, T, C] -> [B, ceil(T / chunk), routing_dim]."""
        batch, seq, width = x.shape
        x = F.pad(x, (0, 0, 0, -seq % chunk))
        return self.proj(x.view(batch, -1, chunk, width).mean(dim=2))


class RetrievalGate(nn.Module):
    """Each query's top_b chunks by cosine similarity of its projection to
    the chunks' routing embeddings."""

    def __init__(self, config: GPT2Config) -> None:
        super().__init__()
        self.query_proj = nn.Linear(config.n_embd, config.rgsa_routing_dim, bias=config.bias)
        self.requires_grad_(False)  # as the chunk router's
        self.top_b = config.rgsa_top_b
        self.random = config.rgsa_routing == "random"
        self.stride = config.rgsa_route_stride

    def forward(self, x: Tensor, chunks: Tensor) -> tuple[Tensor, Tensor]:
        """Chunk indices [B, T, min(top_b, chunks)] and scores [B, T, chunks]."""
        batch, seq, _ = x.shape
        queries = self.query_proj(x)
        blocked = 0 < self.stride < seq
        if blocked:  # one routing per block of `stride` queries, their mean
            queries = F.pad(queries, (0, 0, 0, -seq % self.stride))
            queries = queries.view(batch, -1, self.stride, queries.size(-1)).mean(dim=2)
        scores = F.normalize(queries, dim=-1) @ F.normalize(chunks, dim=-1).transpose(1, 2)
        k = min(self.top_b, chunks.size(1))
        if self.random:
            shape = (batch, scores.size(1), k)
            picked = torch.randint(0, chunks.size(1), shape, device=x.device)
        else:
            picked = scores.topk(k, dim=-1).indices
        if blocked:
            picked = picked.repeat_interleave(self.stride, dim=1)[:, :seq]
            scores = scores.repeat_interleave(self.stride, dim=1)[:, :seq]
        return picked, scores


@dataclass
class Shared:
    """What every RGSA layer of one model shares: the chunk router (a module
    of layer 0 only, so it is one set of parameters in the state dict) and
    the chunk embeddings cached across layers (cache_routing_layers)."""

    router: ChunkRouter
    chunks: Tensor | None = None


class RGSAAttention(CausalSelfAttention):
    """Vanilla attention that also routes (see the module docstring)."""

    def __init__(self, config: GPT2Config, index: int, shared: Shared) -> None:
        super().__init__(config)
        if index == 0:
            self.chunk_router = shared.router
        self.shared = [shared]  # a list: not registered again as a submodule
        self.retrieval_gate = RetrievalGate(config)
        self.config, self.index = config, index
        # The last forward's routing: (chunk indices, scores, chunk size).
        self.routing: tuple[Tensor, Tensor, int] | None = None

    def forward(self, x: Tensor, cache: KVCache | None = None) -> Tensor:
        """x: [B, T, C]. With a cache, x holds only the tokens after it."""
        if cache is None:
            self.route(x)
        return super().forward(x, cache)

    @torch.no_grad()  # the reference's routing never reaches the loss: no gradient
    def route(self, x: Tensor) -> None:
        cfg, shared = self.config, self.shared[0]
        chunk = chunk_size(x.size(1), cfg)
        if cfg.rgsa_routing == "dense" or x.size(1) <= cfg.rgsa_local_window + chunk:
            self.routing = shared.chunks = None
            return
        every = cfg.rgsa_cache_routing_layers
        if every == 0 or self.index % every == 0 or shared.chunks is None:
            shared.chunks = shared.router(x, chunk)
        picked, scores = self.retrieval_gate(x, shared.chunks)
        self.routing = (picked, scores, chunk)

    def aux_metrics(self) -> dict[str, float]:
        """Layer 0's routing metrics (module docstring); {} elsewhere or
        when the last forward did not route."""
        if self.index != 0 or self.routing is None:
            return {}
        picked, scores, chunk = self.routing
        chunks = scores.size(-1)
        probs = scores.float().softmax(dim=-1)
        entropy = -(probs * torch.log(probs + 1e-10)).sum(dim=-1).mean()
        counts = torch.bincount(picked.reshape(-1), minlength=chunks).float()
        share = counts / counts.sum()
        balance = max(0.0, 1.0 - float(share.std() / (share.mean() + 1e-10)))
        return {
            "rgsa_entropy": float(entropy) / float(torch.log(torch.tensor(float(chunks)))),
            "rgsa_balance": balance,
            "rgsa_chunk": float(chunk),
        }


def _build(config: GPT2Config) -> list[nn.Module]:
    shared = Shared(ChunkRouter(config))
    return [RGSAAttention(config, i, shared) for i in range(config.n_layer)]


RGSA = AttentionLayers(
    layer=lambda c, i: RGSAAttention(c, i, Shared(ChunkRouter(c))),  # a layer alone
    new_cache=lambda c, i: KVCache(),
    cache_width=lambda c, i: kv_cache_width(c),
    pair_width=lambda c, i: c.n_head * 2 * c.head_dim,
    build_all=_build,
)
