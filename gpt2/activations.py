"""GPT-2's activation formula for the memory estimate (lib/model/activations.py
describes the method).

The architecture options, per block, as measured with saved_tensors_hooks
on the CPU (w = n_embd + kv_dim, the width of q and k together):
* GQA: c_attn's output is n_embd + 2 kv_dim wide instead of 3 n_embd; the
  RA forms also keep the value heads repeated for their query groups.
* RoPE: the rotated q and k (a N w; SDPA's inputs are no longer views of
  c_attn's output) and the cos/sin tables, 2 T head_dim elements per layer.
* QK-norm: RMSNorm runs in its fp32 gain's dtype (gpt2/norm.py normed): it
  keeps x * rstd (4 N w), under autocast an fp32 copy of its 16-bit input
  (4 N w), rstd (4 N per head), and SDPA the normalised q and k cast back
  (a N w).
* RMSNorm: rstd (4 N) instead of LayerNorm's mean and rstd (8 N), plus
  x * rstd in fp32 (4 N C), kept for the gain's gradient.
* SwiGLU: c_fc's and c_gate's outputs, silu's output and the product
  (4 a N H, H its hidden width); under autocast each of the two input
  Linears keeps its own 16-bit copy of ln_2's output.
An untied head changes no activation (its parameters are memory.py's).
"""

from __future__ import annotations

from typing import Any

from gpt2.config import swiglu_hidden
from gpt2.variants import variant
from lib.model.activations import Activations, R, Shape, attention_core, fused_possible


def gpt2_attention(cfg: Any, s: Shape) -> tuple[dict[str, int], bool]:
    """Saved bytes of one attention layer (from its input LayerNorm's output)."""
    n, c, a, d, h = s.tokens, cfg.n_embd, s.act, cfg.head_dim, cfg.n_head
    kind = variant(cfg.attention)  # its traits decide what it keeps
    if kind.kvsplice:
        return _knlp_latent(cfg, s)
    reciprocal = kind.reciprocal and (cfg.ra_alpha > 0 or cfg.ra_alpha_learned)
    parts: dict[str, int] = {}
    if kind.latent:
        rope = cfg.rope_dim
        readers = 2 + (1 if rope else 0)  # kv_down, q_proj or q_down, k_rope
        parts["ln_1_out"] = (readers if a < 4 else 1) * a * n * c
        parts["mla_latent"] = a * n * cfg.latent_dim * (2 if cfg.q_latent else 1)
        if rope:
            parts["mla_rope"] = a * n * (h + 1) * rope
        q_width = d + rope
        inputs = {
            "q": a * n * h * q_width,
            "k": a * n * h * q_width,
            "v": a * n * (c if cfg.v_up_per_head else d),
        }
    else:
        parts["ln_1_out"] = a * n * c
        q_width = d
        inputs = {"qkv": a * n * (c + 2 * cfg.kv_dim)}
        parts.update(_qk_extras(cfg, s))
    if reciprocal and 0 < cfg.ra_window < s.seq:
        # The band is computed explicitly: the fp32 softmax, and under autocast
        # its 16-bit copy that multiplies v.
        scores = s.batch * h * s.seq * s.seq
        parts.update(inputs, ra_band_scores=(4 + (a if a < 4 else 0)) * scores, attn_out=a * n * c)
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
    gated_ra = kind.gated_ra
    if kind.output_gate:
        # The gate's sigmoid output and the gated heads' output (c_proj's
        # input); under autocast the gate Linear keeps its own copy of ln_1's.
        parts["output_gate"] = (2 + (1 if a < 4 else 0)) * a * n * c
        if gated_ra and fused:
            # On a reverse layer the product only feeds the branch's sum, which
            # _gated_branch counts as c_proj's input: one tensor fewer. Without
            # a fused kernel the sum is new beside the merged heads the product
            # keeps (attn_out), so the count stands.
            parts["output_gate"] -= a * n * c * cfg.ra_gated_layers // cfg.n_layer
    if gated_ra:
        parts["ra_gated_branch"] = _gated_branch(cfg, s, fused) * cfg.ra_gated_layers // cfg.n_layer
    if cfg.kv_dim != c and reciprocal and not kind.latent:
        parts["gqa_repeated_v"] = a * n * c  # SDPA reads the values repeated per query head
    if cfg.qk_norm and kind.latent:
        # the content q and k (n_embd wide each): the norm's input (no longer only
        # consumed by the cat with the rotary part), x * rstd, the fp32 input copy, rstd
        parts["qk_norm"] = 2 * (a + 4 + (4 if a < 4 else 0)) * n * c + 2 * 4 * n * h
    return parts, fused


def _knlp_latent(cfg: Any, s: Shape) -> tuple[dict[str, int], bool]:
    """knlp's MLA family (gpt2/kvsplice.py), one average layer: each MLA
    layer keeps ln_1's output (per reader under autocast: W_q and
    to_kv_latent), the latent, from_kv_latent's output (v is a view of it),
    the rotated q and k and the heads' output; each KVSplice layer ln_1's
    output, the latent, the compress output and its LayerNorm's statistics
    (fp32 under autocast, which also keeps an fp32 copy of the input), the
    normalised c (per reader: q_proj_compressed and kv_proj_compressed),
    kv_proj_compressed's output, the rotated q and k, the one head's output
    and z (read by the tied map and out_residual). Both keep their RoPE
    tables (cos and sin for q and for k). Within 0.1 % of the CPU's measured
    peak in fp32 and bf16, 0.1 % with dropout (the math path)."""
    from gpt2.config import kvsplice_width

    n, c, a, d = s.tokens, cfg.n_embd, s.act, cfg.head_dim
    latent, dc = cfg.knlp_mla_latent, kvsplice_width(cfg)
    spliced = {
        "knlp_mla": 0,
        "knlp_mla_kv": cfg.n_layer,
        "knlp_mla_kv_fim": cfg.kvsplice_layers,
    }[cfg.attention]
    fused = fused_possible(s, d, d)
    two_readers = 2 if a < 4 else 1
    mla = {
        "ln_1_out": two_readers * a * n * c,
        "latent": a * n * latent,
        "kv": 2 * a * n * c,
        "q_k_rotated": 2 * a * n * c,
        "rope_tables": 2 * s.seq * d * a,
        **attention_core(cfg, s, d, d, fused),
    }
    # CUDA's autocast runs LayerNorm in fp32 (it keeps an fp32 copy of its
    # input, and each reader casts the output); the CPU's keeps it in 16 bits.
    cuda_autocast = a < 4 and s.device == "cuda"
    splice = {
        "ln_1_out": a * n * c,
        "latent": a * n * latent,
        "compressed": (4 if cuda_autocast else a) * n * dc + 8 * n,
        "c": (2 if cuda_autocast else 1) * a * n * dc,
        "kv": 2 * a * n * dc,
        "q_k_rotated": 2 * a * n * dc,
        "rope_tables": 2 * s.seq * dc * a,
        "z": a * n * latent,
        **attention_core(cfg, s, dc, dc, fused, heads=1),
    }
    if not fused:  # the math path keeps its own scaled q, k and copy of v instead
        del mla["kv"], mla["q_k_rotated"], splice["q_k_rotated"]
        splice["kv"] //= 2  # as measured on the CPU: the one head's v stays
    plain = cfg.n_layer - spliced
    parts = {f"knlp_mla_{k}": v * plain // cfg.n_layer for k, v in mla.items() if plain} | {
        f"kvsplice_{k}": v * spliced // cfg.n_layer for k, v in splice.items() if spliced
    }
    return parts, fused


def _qk_extras(cfg: Any, s: Shape) -> dict[str, int]:
    """What QK-norm and RoPE keep for q and k over c_attn (module docstring)."""
    n, a, w = s.tokens, s.act, cfg.n_embd + cfg.kv_dim
    rope, qk = cfg.position == "rope", cfg.qk_norm
    out = {}
    if qk:
        out["qk_norm"] = (4 + (4 if a < 4 else 0)) * n * w + 4 * n * (cfg.n_head + cfg.kv_heads)
    if rope or qk:
        out["qk_sdpa_inputs"] = a * n * w
    if rope:  # cos and sin for q and for k, in the rotated tensor's dtype
        out["rope_tables"] = 2 * s.seq * cfg.head_dim * a
    return out


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
    extra = a * n * c if fused else 0
    if cfg.kv_dim != c:  # GQA: the reverse heads read keys and values repeated per query head
        extra += 2 * a * n * c
    if cfg.norm == "rmsnorm":  # ra_norm keeps x * rstd (fp32) and one statistic, not two
        extra += 4 * n * c - 4 * n
    return sum(core.values()) + 2 * norm * n * c + 8 * n + extra


def activations(cfg: Any, s: Shape) -> Activations:
    n, c, a = s.tokens, cfg.n_embd, s.act
    parts, fused = gpt2_attention(cfg, s)
    parts.update({"block_input": R * n * c, "mid_stream": R * n * c})
    if cfg.mlp == "swiglu":
        readers = 2 if a < 4 else 1  # c_fc and c_gate
        parts.update(ln_2_out=readers * a * n * c, swiglu=4 * a * n * swiglu_hidden(c))
    else:
        parts.update(ln_2_out=a * n * c, gelu_in_out=8 * a * n * c)
    rms = cfg.norm == "rmsnorm"
    if rms:
        parts.update(rmsnorm_stats=2 * 4 * n, rmsnorm_scaled=2 * R * n * c)
    else:
        parts["layernorm_stats"] = 16 * n
    if s.mask:  # after attention and after the MLP; knlp's latent layers drop only the latter
        parts["dropout_masks"] = (1 if variant(cfg.attention).kvsplice else 2) * s.mask * n * c
    # ln_f's input, statistics (and x * rstd), the head's input, the ids
    ln_f = 4 * n + R * n * c if rms else 8 * n
    base = R * n * c + a * n * c + ln_f + 16 * n + s.mask * n * c
    return Activations(parts, base, R * n * c, fused)
