"""Bytes one training forward pass keeps for the backward pass, per block.

Counted tensor by tensor from what each operation saves for its backward
(checked against torch.autograd.graph.saved_tensors_hooks on CPU), for
B sequences of T tokens (N = B T), width C:

* The residual stream is fp32 (the weights are), r = 4 bytes per element;
  matmul inputs and outputs are in the autocast dtype, a = 2 (bf16/fp16)
  or 4 (fp32). Autocast casts a Linear's input for every Linear that reads
  it, so a LayerNorm output read by k Linears is kept k times in 16 bits.
* GPT-2 block: its input x and the mid-block stream (LayerNorms save their
  input, 2 r N C), ln_1 and ln_2 outputs (a N C each), q, k, v (3 a N C),
  the attention output (a N C), GELU input and output (8 a N C): with a
  fused attention kernel (flash, memory-efficient, CPU flash) 64 N C bytes
  in fp32 and 36 N C in bf16 (Korthikanti et al. 2022 count 34 with a
  16-bit residual). Without one (CPU with attention dropout, q/k width
  unlike v's, RA's band) the B H T T scores are kept: softmax output, and
  with dropout its mask and the dropped scores.
* Dropout keeps a mask per site: one byte on CUDA, a full-width tensor on
  the CPU (its kernel multiplies by a scaled noise tensor).
* MLA keeps the latent c_KV (a N d_c) and, with low-rank queries, the query
  latent; the SDPA output gate its sigmoid and the gated output (2 a N C);
  gated RA, per reverse layer, the reverse SDPA's output over its heads,
  ra_norm's input and output and c_proj's new input; HAMT keeps the fp32 spectra of values and keys, the chunks' C x C
  mixing matrices (N x chunk) and the slot states at chunk boundaries
  (N / chunk x slots x hcm_dim, twice). Slots that forget faster than about
  0.14 per token take hamt/scan.py's explicit path, which also keeps
  N x chunk x slots products; the estimate assumes the factored one.

Per-block gradient checkpointing keeps only each block's input (r N C) and
recomputes one block at a time during the backward pass.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

R = 4  # bytes of the fp32 residual stream


@dataclass(frozen=True)
class Shape:
    """What the formulas need besides the model config."""
    batch: int
    seq: int
    act: int              # bytes per autocast activation element: 2 or 4
    device: str           # "cuda", "cpu", "mps"
    dropout: float

    @property
    def tokens(self) -> int:
        return self.batch * self.seq

    @property
    def mask(self) -> int:
        """Bytes per element of a dropout mask (0 without dropout)."""
        if not self.dropout:
            return 0
        return 1 if self.device == "cuda" else self.act


@dataclass(frozen=True)
class Activations:
    per_layer: dict[str, int]          # named parts of one block's saved tensors
    base: int                          # outside the blocks: embeddings, final norm, head input
    checkpointed_layer: int            # what a checkpointed block keeps: its input
    fused_attention: bool = True
    notes: list[str] = field(default_factory=list)

    @property
    def layer_bytes(self) -> int:
        return sum(self.per_layer.values())


def _attention_core(cfg: Any, s: Shape, q_width: int, v_width: int,
                    fused: bool, heads: int | None = None) -> dict[str, int]:
    """What SDPA keeps beyond its inputs, for per-head widths q/k and v
    (over all heads, or `heads` of them)."""
    n, h = s.tokens, heads or cfg.n_head
    out = {"attn_out": s.act * n * h * v_width}
    if fused:
        out["attn_lse"] = 4 * s.batch * h * s.seq
        return out
    # The math path (fp32 on the CPU) keeps scaled q and k, a copy of v and the scores.
    compute = 4 if s.device == "cpu" else s.act
    scores = s.batch * h * s.seq * s.seq
    out["attn_qk_scaled"] = compute * n * h * 2 * q_width
    out["attn_v_copy"] = compute * n * h * v_width
    out["attn_scores"] = compute * scores
    if s.dropout:
        out["attn_scores_dropout"] = (s.mask + compute) * scores
    return out


def _fused_possible(s: Shape, q_width: int, v_width: int) -> bool:
    """Whether SDPA runs a fused kernel: on CUDA always (flash or memory-
    efficient); the CPU kernel needs equal q/v widths and no dropout."""
    if s.device == "cuda":
        return True
    return q_width == v_width and not s.dropout


def gpt2_attention(cfg: Any, s: Shape) -> tuple[dict[str, int], bool]:
    """Saved bytes of one attention layer (from its input LayerNorm's output)."""
    n, c, a, d, h = s.tokens, cfg.n_embd, s.act, cfg.head_dim, cfg.n_head
    reciprocal = cfg.attention in ("ra_logit", "ra_mla") and (cfg.ra_alpha > 0
                                                              or cfg.ra_alpha_learned)
    parts: dict[str, int] = {}
    if cfg.attention in ("mla", "ra_mla"):
        rope = cfg.rope_dim
        readers = 2 + (1 if rope else 0)  # kv_down, q_proj or q_down, k_rope
        parts["ln_1_out"] = (readers if a < 4 else 1) * a * n * c
        parts["mla_latent"] = a * n * cfg.latent_dim * (2 if cfg.q_latent else 1)
        if rope:
            parts["mla_rope"] = a * n * (h + 1) * rope
        q_width = d + rope
        inputs = {"q": a * n * h * q_width, "k": a * n * h * q_width,
                  "v": a * n * (c if cfg.v_up_per_head else d)}
    else:
        parts["ln_1_out"] = a * n * c
        q_width = d
        inputs = {"qkv": 3 * a * n * c}
    if reciprocal and 0 < cfg.ra_window < s.seq:
        # The band is computed explicitly: the fp32 softmax, and under autocast
        # its 16-bit copy that multiplies v.
        scores = s.batch * h * s.seq * s.seq
        parts.update(inputs, ra_band_scores=(4 + (a if a < 4 else 0)) * scores,
                     attn_out=a * n * c)
        return parts, False
    learned_k = {}
    if reciprocal:
        # q' = [q, sqrt(alpha) k] and k' = [k, sqrt(alpha) q]: twice as wide.
        inputs["ra_augmented"] = 2 * a * n * h * 2 * q_width
        if cfg.ra_alpha_learned:  # alpha * k keeps k: MLA's own, or c_attn's output
            learned_k = {"k": inputs["k"]} if "k" in inputs else {"qkv": inputs["qkv"]}
        inputs.pop("q", None), inputs.pop("k", None)  # MLA's q, k live on only in q', k'
        q_width *= 2
    fused = _fused_possible(s, q_width, d)
    if fused:
        parts.update(inputs)
    parts.update(learned_k)
    parts.update(_attention_core(cfg, s, q_width, d, fused))
    if cfg.attention == "sdpa_gate":
        # The gate's sigmoid output and the gated heads' output (c_proj's
        # input); under autocast the gate Linear keeps its own copy of ln_1's.
        parts["output_gate"] = (2 + (1 if a < 4 else 0)) * a * n * c
    if cfg.attention == "ra_gated":
        parts["ra_gated_branch"] = _gated_branch(cfg, s, fused) * cfg.ra_gated_layers // cfg.n_layer
    return parts, fused


def _gated_branch(cfg: Any, s: Shape, fused: bool) -> int:
    """Bytes one reverse layer of gated RA keeps beyond vanilla attention: the
    reverse SDPA's own (its inputs are views of c_attn's output), ra_norm's
    input, statistics and output (fp32 on CUDA, where autocast runs
    LayerNorm in fp32), and with a fused kernel c_proj's input, now a new
    sum where vanilla's shares the SDPA output's storage. Without one, the
    math path keeps a view of v and with it c_attn's whole output. Spread
    over the blocks (per_layer is one average block's)."""
    n, c, a, d, heads = s.tokens, cfg.n_embd, s.act, cfg.head_dim, cfg.ra_gated_heads
    norm = 4 if s.device == "cuda" else a
    core = _attention_core(cfg, s, d, d, fused, heads)
    if not fused:
        core["attn_v_copy"] = 3 * a * n * c
    return sum(core.values()) + 2 * norm * n * c + 8 * n + (a * n * c if fused else 0)


def gpt2_activations(cfg: Any, s: Shape) -> Activations:
    n, c, a = s.tokens, cfg.n_embd, s.act
    parts, fused = gpt2_attention(cfg, s)
    parts.update({
        "block_input": R * n * c, "mid_stream": R * n * c,
        "ln_2_out": a * n * c, "gelu_in_out": 8 * a * n * c,
        "layernorm_stats": 16 * n,
    })
    if s.mask:
        parts["dropout_masks"] = 2 * s.mask * n * c
    base = R * n * c + a * n * c + 24 * n + s.mask * n * c  # ln_f in, head input, ids
    return Activations(parts, base, R * n * c, fused)


def hamt_activations(cfg: Any, s: Shape) -> Activations:
    n, c, a = s.tokens, cfg.n_embd, s.act
    dim, slots, chunk = cfg.hcm_dim, cfg.num_slots, min(cfg.chunk_size, s.seq)
    parts = {
        "block_input": R * n * c, "mid_stream": R * n * c,
        # c_in runs as two Linears (spectra, gate logits) over ln_1's output.
        "ln_1_out": (2 if a < 4 else 1) * a * n * c,
        # fp32 spectra of value, write and read keys; unit keys, two key-sized
        # buffers of the binding and the keys' per-bin magnitudes (hamt/spectral.py).
        "hamt_spectra": 4 * 3 * n * dim + 2 * 4 * 2 * n * dim + 4 * 2 * n * (dim // 2 - 1),
        "hamt_bound_reads": 2 * 4 * n * dim + a * n * dim,  # bound, reads, c_proj input
        # The C x C mixing matrix per chunk and six N x S gate/read/decay factors.
        "hamt_chunk_mixing": 4 * n * chunk + 6 * 4 * n * slots,
        "hamt_slot_states": 2 * 4 * -(-s.seq // chunk) * s.batch * slots * dim,
        "hamt_folded_weights": a * 4 * dim * c,
        "ln_2_out": a * n * c, "gelu_in_out": 8 * a * n * c,
        "layernorm_stats": 16 * n,
    }
    if s.mask:
        parts["dropout_masks"] = 2 * s.mask * n * c
    base = R * n * c + a * n * c + 24 * n + s.mask * n * c
    return Activations(parts, base, R * n * c, True)


# Config class name -> formula; a new family adds its own here.
FORMULAS = {"GPT2Config": gpt2_activations, "HAMTConfig": hamt_activations}


def activations(cfg: Any, s: Shape) -> Activations:
    try:
        formula = FORMULAS[type(cfg).__name__]
    except KeyError:
        raise ValueError(f"no activation formula for {type(cfg).__name__}: add one to "
                         f"lib/estimate/activations.py") from None
    return formula(cfg, s)
