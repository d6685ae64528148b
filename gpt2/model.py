"""GPT-2 (Radford et al. 2019): a decoder-only pre-LayerNorm transformer.

Module names follow the published checkpoints (transformer.wte,
transformer.h.0.attn.c_attn, ...) so that a Hugging Face GPT-2 state dict
maps onto this model by name. Those checkpoints store the four Linear
weights of a block as Conv1D, i.e. transposed; a loader must transpose
them and skip the checkpoint's attn.bias / attn.masked_bias buffers.

The architecture options after GPT-2 (GPT2Config.position, norm, mlp,
n_kv_head, qk_norm, tie_head; each default is GPT-2's) change modules, not
names: with RoPE there is no transformer.wpe, RMSNorm replaces the
LayerNorms under their names, SwiGLU adds mlp.c_gate, an untied head has
its own lm_head.weight.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from gpt2.attention import CausalSelfAttention
from gpt2.config import GPT2Config

# MLP is re-exported: hamt/block.py imports it from here
from gpt2.mlp import MLP as MLP
from gpt2.mlp import make_mlp
from gpt2.norm import make_norm
from gpt2.variants import layers, variant
from lib.model.interface import LanguageModel, init_weights
from lib.model.sampling import check_sampling, sample_token


def cache_elements_per_token(config: GPT2Config) -> int:
    """Elements the generation cache holds per token, over all layers."""
    width = layers(config.attention).cache_width
    return sum(width(config, i) for i in range(config.n_layer))


class Block(nn.Module):
    """Pre-norm block: x + attn(ln_1(x)), then x + mlp(ln_2(x)) (LayerNorm
    or RMSNorm, GELU MLP or SwiGLU, as configured)."""

    def __init__(self, config: GPT2Config, attention: nn.Module | None = None) -> None:
        super().__init__()
        self.ln_1 = make_norm(config, config.n_embd)
        self.attn = CausalSelfAttention(config) if attention is None else attention
        self.ln_2 = make_norm(config, config.n_embd)
        self.mlp = make_mlp(config)

    def forward(self, x: Tensor, cache: Any = None) -> Tensor:
        x = x + self.attn(self.ln_1(x), cache)
        return x + self.mlp(self.ln_2(x))


class GPT2(LanguageModel):
    """GPT-2 language model, the LM head tied to the token embedding unless
    config.tie_head is False."""

    def __init__(self, config: GPT2Config) -> None:
        super().__init__()
        self.config = config
        modules: dict[str, nn.Module] = {"wte": nn.Embedding(config.vocab_size, config.n_embd)}
        if config.position == "learned":  # RoPE positions live in the attention layers
            modules["wpe"] = nn.Embedding(config.block_size, config.n_embd)
        self.transformer = nn.ModuleDict(
            {
                **modules,
                "drop": nn.Dropout(config.dropout),
                "h": nn.ModuleList(
                    Block(config, a) for a in layers(config.attention).build(config)
                ),
                "ln_f": make_norm(config, config.n_embd),
            }
        )
        self.tie_head()
        if not config.tie_head:  # its own matrix, initialised with the rest below
            self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        if variant(config.attention).plain_init:  # knlp's init (gpt2/kvsplice.py)
            init_weights(self, [])
        else:
            init_weights(self, [(b.attn.c_proj, b.mlp.c_proj) for b in self.transformer.h])

    # ----------------------------------------------------------- forward

    def forward(self, idx: Tensor, targets: Tensor | None = None) -> tuple[Tensor, Tensor | None]:
        """Logits and mean cross-entropy loss (LanguageModel.logits_and_loss)."""
        return self.logits_and_loss(self._hidden(idx, caches=None), targets)

    def hidden_states(self, idx: Tensor) -> Tensor:
        """Final hidden states [B, T, C], which lm_head maps to logits: lets an
        evaluation put only the positions it scores through the head."""
        return self._hidden(idx, caches=None)

    def blocks(self) -> nn.ModuleList:
        return self.transformer.h

    def embedding(self) -> nn.Embedding:
        return self.transformer.wte

    def new_cache(self) -> list[Any]:
        """An empty generation cache of the attention's kind, one per block."""
        make = layers(self.config.attention).new_cache
        return [make(self.config, i) for i in range(self.config.n_layer)]

    def cache_bytes_per_token(self) -> int:
        """Bytes the generation cache holds per token over all layers, in
        the parameters' dtype (vanilla 2 * n_layer * n_embd elements,
        2 * n_layer * kv_dim with grouped-query attention)."""
        element = next(self.parameters()).element_size()
        return cache_elements_per_token(self.config) * element

    def forward_cached(self, idx: Tensor, caches: list[Any]) -> Tensor:
        """Logits [B, T, V] for idx, the tokens that follow those in caches.

        The caches are extended in place, so calling this on a prompt and
        then on each new token gives the same logits as one full forward.
        """
        if len(caches) != self.config.n_layer:
            raise ValueError(f"got {len(caches)} caches for {self.config.n_layer} layers")
        return self.lm_head(self._hidden(idx, caches))

    def start_generation(self, idx: Tensor) -> tuple[Tensor, list[Any]]:
        """The prompt through a new cache: (its last token's logits, the cache)."""
        caches = self.new_cache()
        return self.lm_head(self._hidden(idx, caches)[:, -1:, :]), caches

    def continue_generation(self, idx: Tensor, state: list[Any]) -> tuple[Tensor, list[Any]]:
        return self.forward_cached(idx, state), state

    def generation_bytes(self, seq_len: int, batch: int = 1) -> int:
        """The KV (or latent) cache grows with every token."""
        return self.cache_bytes_per_token() * seq_len * batch

    def _hidden(self, idx: Tensor, caches: list[Any] | None) -> Tensor:
        """Final LayerNorm output [B, T, C] for idx placed after the caches."""
        start = caches[0].pos if caches else 0
        end = start + idx.size(1)
        if end > self.config.block_size:
            raise ValueError(f"sequence length {end} exceeds block_size {self.config.block_size}")
        x = self.transformer.wte(idx)
        if "wpe" in self.transformer:
            x = x + self.transformer.wpe(
                torch.arange(start, end, dtype=torch.long, device=idx.device)
            )
        x = self.transformer.drop(x)
        for i, block in enumerate(self.transformer.h):
            x = block(x, caches[i] if caches else None)
        return self.transformer.ln_f(x)

    # ------------------------------------------------- trainer interface

    def num_params(self, non_embedding: bool = True) -> int:
        """Parameter count; the tied token embedding is counted once.

        non_embedding drops the embedding tables that are lookups, not
        matmuls, the usual convention for scaling laws and FLOP estimates:
        the position table (none with RoPE), and the token embedding only
        when the head is untied (tied, it is also the output layer's
        matmul; untied, the head's own matrix is that matmul).
        """
        total = sum(p.numel() for p in self.parameters())
        if non_embedding:
            if "wpe" in self.transformer:
                total -= self.transformer.wpe.weight.numel()
            if self.lm_head.weight is not self.transformer.wte.weight:
                total -= self.transformer.wte.weight.numel()
        return total

    def flops_per_token(self, seq_len: int) -> int:
        """Training FLOPs per token: 6N + 6 T sum over layers and heads of
        (w_qk + w_v) (PaLM, appendix B).

        6N covers the forward and backward matmuls with the weights (N
        without the lookup tables, see num_params; MLA's down and up
        projections, the output gate, the gated RA's ra_proj, SwiGLU's
        three matrices and an untied head are weights like any other; the
        norms' gains count too, a negligible overcount). Grouped-query
        attention shrinks only N (c_attn projects 2 kv_dim instead of 2 C
        for k and v); the second term is per query head and unchanged, since
        every query head still scores T keys and sums T values of head_dim.
        RoPE's rotations (about 3 FLOPs per q and k element) and QK-norm
        are left out: elementwise, O(C) per token against O(C^2).
        The second term is attention's weight-free work: per head a token's
        query is scored against T keys (2 T w_qk FLOPs) and T values are
        summed (2 T w_v), tripled for the backward pass; T is the whole
        context, masking not subtracted:
          vanilla, sdpa_gate, rgsa: w_qk = w_v = head_dim Q, so 12 L H Q T
          (rgsa's routing is left out, and its frozen router's matrices
          counted in N though they get no backward: a small overcount);
          mla: w_qk = Q + R (R = rope_dim, the decoupled rotary part), w_v = Q;
          ra_logit, ra_mla (alpha > 0 or learned): w_qk doubled, 2 Q or
          2 (Q + R), since the scores are dot products of the augmented
          [q, sqrt(alpha) k] and [k, sqrt(alpha) q] (the banded path scores
          the same vectors); a fixed alpha = 0 runs the base attention;
          ra_gated, sdpa_gate_ra_gated: each reverse head of a reverse
          layer is one more head (w_qk = w_v = Q), 12 T Q per reverse head;
          knlp_mla layers: vanilla's; knlp_mla_kv layers: one head of d_comp
          (w_qk = w_v = d_comp, gpt2/kvsplice.py), 12 T d_comp per layer.
        """
        cfg = self.config
        width = layers(cfg.attention).pair_width
        attention = 6 * seq_len * sum(width(cfg, i) for i in range(cfg.n_layer))
        return 6 * self.num_params(non_embedding=True) + attention

    def aux_metrics(self) -> dict[str, float]:
        """What the attention layers report on the last forward (RGSA's
        routing metrics, gpt2/rgsa.py); none for the other variants."""
        metrics: dict[str, float] = {}
        for block in self.transformer.h:
            report = getattr(block.attn, "aux_metrics", None)
            if report is not None:
                metrics.update(report())
        return metrics

    # -------------------------------------------------------- generation

    @torch.no_grad()
    def generate(
        self,
        idx: Tensor,
        max_new_tokens: int,
        temperature: float = 1.0,
        top_k: int | None = None,
        use_cache: bool = True,
    ) -> Tensor:
        """Append max_new_tokens sampled tokens to idx [B, T]; return [B, T + n].

        temperature 0 picks the most likely token. Dropout is switched off
        while generating and the previous mode restored afterwards.

        With use_cache the prompt is run once and each later step feeds only
        the newest token. The learned position embedding has block_size
        rows, so once the sequence outgrows block_size the cache (whose
        entries sit at the old positions) is dropped and every further step
        recomputes the last block_size tokens without it (which is why GPT-2
        overrides LanguageModel.generate: its positions end at block_size).
        RoPE models do the same: they were trained on at most block_size
        positions.
        """
        check_sampling(temperature, top_k)
        was_training = self.training
        self.eval()
        try:
            caches = self.new_cache() if use_cache else None
            for _ in range(max_new_tokens):
                if caches is not None and idx.size(1) <= self.config.block_size:
                    # The cache holds every token but the newest (or nothing yet).
                    logits = self.forward_cached(idx[:, caches[0].pos :], caches)
                else:
                    caches = None
                    logits, _ = self(idx[:, -self.config.block_size :])
                next_token = sample_token(logits[:, -1, :], temperature, top_k)
                idx = torch.cat((idx, next_token), dim=1)
        finally:
            self.train(was_training)
        return idx
