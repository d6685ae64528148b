"""knlp's attention features, symbol by symbol (the rows of names.py for RGSA, the MLA
family and the gated forms), and how its trainer picks one: gpt2/trainers/vanilla.py
create_model builds MLA (ENABLE_MLA with MLA_VARIANT), else RGSA, else the GPT2_KNLP
gated forms; RA+MLA here wins over all (check.py orders them the same way)."""

from __future__ import annotations

from lib.config.knlp.code import IN_MLA
from lib.config.knlp.row import Row, absent, runtime, same, special

# knlp's RGSA (gpt2/rgsa.py, built by gpt2/trainers/vanilla.py): GPT2_ATTENTION_RGSA
# here (gpt2/rgsa.py). knlp's trainer checks ENABLE_RGSA before GPT2_KNLP, so RGSA wins
# over the gated choices; RA+MLA wins over RGSA (check.py orders them so).
_IN_RGSA = f"ENABLE_RGSA && !ENABLE_RA_MLA && !({IN_MLA})"
GATED_IN_USE = f"GPT2_KNLP && !ENABLE_RA_MLA && !ENABLE_RGSA && !({IN_MLA})"
_RGSA_UNREAD = (
    "not in knlp's Kconfig, so its .config drops it and its trainer's getattr() default applies"
)
RGSA_ROWS: dict[str, Row] = {
    "ENABLE_RGSA": Row("member", "GPT2_ATTENTION_RGSA", when=_IN_RGSA),
    **{
        f"RGSA_{n}": same(f"GPT2_RGSA_{n}", _IN_RGSA)
        for n in (
            "CHUNK_SIZE",
            "ROUTING_DIM",
            "TOP_B",
            "LOCAL_WINDOW",
            "ROUTE_STRIDE",
            "CACHE_ROUTING_LAYERS",
            "DYNAMIC_CHUNKING",
            "CHUNK_SIZE_MIN",
            "CHUNK_SIZE_MAX",
            "CHUNK_SIZE_ALPHA",
        )
    },
    "RGSA_CHUNK_SIZE_PIECEWISE": same("GPT2_RGSA_CHUNK_PIECEWISE", _IN_RGSA),
    # dense_mode skips routing, so it wins over random routing (its forward)
    "RGSA_DENSE_MODE": Row("member", "GPT2_RGSA_ROUTING_DENSE", when=_IN_RGSA),
    "RGSA_RANDOM_ROUTING": Row(
        "member", "GPT2_RGSA_ROUTING_RANDOM", when=_IN_RGSA + " && !RGSA_DENSE_MODE"
    ),
    "RGSA_CHUNK_SIZE_SCHEDULE": Row(
        "values",
        values=(
            ("power", "GPT2_RGSA_CHUNK_SCHEDULE_POWER"),
            ("piecewise", "GPT2_RGSA_CHUNK_SCHEDULE_PIECEWISE"),
        ),
        when=_IN_RGSA,
    ),
    "RGSA_CHUNK_SIZE_ROUNDING": Row(
        "values",
        values=tuple(
            (v, "GPT2_RGSA_CHUNK_ROUNDING_" + v.upper())
            for v in ("pow2", "multiple_of_8", "nearest")
        ),
        when=_IN_RGSA,
    ),
    "RGSA_ROUTING_LOSS_WEIGHT": runtime(
        "knlp never adds a routing loss: its trainer does not pass the weight to RGSAConfig "
        "and GPT2_RGSA.compute_routing_loss returns 0, uncalled"
    ),
    "RGSA_CHUNK_SIZE_DEBUG_LOG": runtime(
        "knlp's console print of the chunk size; the rgsa_chunk metric here"
    ),
    **{
        f"RGSA_{n}": absent(_RGSA_UNREAD)
        for n in (
            "ROUTER_UPDATE_STRIDE",  # router gradient gating: the router gets none anyway
            "ROUTER_FREEZE_STEPS",
            "VARIANCE_ALPHA",
            "SENSITIVITY_PATH",
            "TOP_B_MIN",
            "TOP_B_MAX",
        )
    },
}

_MLA_UNREAD = "not in knlp's Kconfig, so its .config drops it and its trainer's default applies"
MLA_ROWS: dict[str, Row] = {
    "ENABLE_MLA": special(),  # with MLA_VARIANT: the attention (translate.py knlp_mla)
    "MLA_VARIANT": special(),
    "MLA_D_LATENT": same("GPT2_KNLP_MLA_LATENT", IN_MLA),
    "MLA_COMPRESSION_RATIO": special(),  # read by the KVSplice forms only
    "MLA_KV_FIM_LAYERS": absent(_MLA_UNREAD + ": KVSplice on the last 4 layers"),
    "MLA_VARIANTS": absent(_MLA_UNREAD + ": MLA_VARIANT names the variants"),
    **{
        f"MLA_{n}": absent(_MLA_UNREAD + " (read by its ksplice_asym variant only)")
        for n in ("D_K_LATENT", "D_V_LATENT", "K_QUANT_BITS", "V_QUANT_BITS")
    },
}


# knlp's MLA_VARIANT entry -> our attention variant, by the rule of its create_model
# (gpt2/trainers/vanilla.py): the first of these substrings the entry holds decides;
# an entry with none of them builds its base MLA. "ksplice_asym" is a feature not here.
MLA_FORMS = (
    ("ksplice_asym", None),
    ("mla_kv_fim", "knlp_mla_kv_fim"),
    ("mla_kv", "knlp_mla_kv"),
)
MLA_BASE = "knlp_mla"


def mla_form(entry: str) -> str | None:
    """Our variant for one MLA_VARIANT entry; None for knlp's ksplice_asym."""
    low = entry.lower()
    return next((ours for key, ours in MLA_FORMS if key in low), MLA_BASE)


# knlp's choice (GPT2_KNLP_SDPA_GATE, GPT2_KNLP_RA) -> our attention member
GATED_ATTENTION = {
    (False, False): "GPT2_ATTENTION_VANILLA",
    (True, False): "GPT2_ATTENTION_SDPA_GATE",
    (False, True): "GPT2_ATTENTION_RA_GATED",
    (True, True): "GPT2_ATTENTION_SDPA_GATE_RA_GATED",
}
