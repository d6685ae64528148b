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

The shared parts (Shape, Activations, SDPA's core) are here; each family's
formula lives with its code (gpt2/activations.py, hamt/activations.py) and
is named by its registry record.
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
    act: int  # bytes per autocast activation element: 2 or 4
    device: str  # "cuda", "cpu", "mps"
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
    per_layer: dict[str, int]  # named parts of one block's saved tensors
    base: int  # outside the blocks: embeddings, final norm, head input
    checkpointed_layer: int  # what a checkpointed block keeps: its input
    fused_attention: bool = True
    notes: list[str] = field(default_factory=list)

    @property
    def layer_bytes(self) -> int:
        return sum(self.per_layer.values())


def attention_core(
    cfg: Any, s: Shape, q_width: int, v_width: int, fused: bool, heads: int | None = None
) -> dict[str, int]:
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


def fused_possible(s: Shape, q_width: int, v_width: int) -> bool:
    """Whether SDPA runs a fused kernel: on CUDA always (flash or memory-
    efficient); the CPU kernel needs equal q/v widths and no dropout."""
    if s.device == "cuda":
        return True
    return q_width == v_width and not s.dropout


def activations(cfg: Any, s: Shape) -> Activations:
    """The saved bytes of the family whose config cfg is (its registry record's formula)."""
    from lib.model import registry

    return registry.family_of_config(cfg).activations(cfg, s)
