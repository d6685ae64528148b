"""GPT-2's activation formula for the memory estimate (lib/estimate/activations.py
describes the method)."""
from __future__ import annotations

from typing import Any

from lib.estimate.activations import R, Activations, Shape, attention_core, fused_possible


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
    fused = fused_possible(s, q_width, d)
    if fused:
        parts.update(inputs)
    parts.update(learned_k)
    parts.update(attention_core(cfg, s, q_width, d, fused))
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
    core = attention_core(cfg, s, d, d, fused, heads)
    if not fused:
        core["attn_v_copy"] = 3 * a * n * c
    return sum(core.values()) + 2 * norm * n * c + 8 * n + (a * n * c if fused else 0)


def activations(cfg: Any, s: Shape) -> Activations:
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
