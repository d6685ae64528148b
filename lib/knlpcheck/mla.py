"""knlp's MLA family, knlp's side and ours, for scripts/check_knlp.sh (check.py).

Read from knlp's code at the table's commit, apart from the translation so that
a wrong one shows: gpt2/trainers/vanilla.py create_model builds GPT2_MLA,
GPT2_MLA_KV or GPT2_MLA_KV_FIM (the first substring of "mla_kv_fim", "mla_kv"
an MLA_VARIANT entry holds; else the base MLA) when ENABLE_MLA is on and
MLA_VARIANT is not empty, before RGSA and GPT2_KNLP; its runner trains one run
per entry. Those models take d_latent from MLA_D_LATENT, the ratio from
MLA_COMPRESSION_RATIO, the last 4 layers for KVSplice (MLA_KV_FIM_LAYERS is no
symbol of its Kconfig, so its .config never holds it), the vocabulary 50257
(its GPT2_MLA* default), biases and a tied head in code.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lib.config.run_config import RunConfig

KNLP_FORMS = (("mla_kv_fim", "knlp_mla_kv_fim"), ("mla_kv", "knlp_mla_kv"))
KV_FORMS = ("knlp_mla_kv", "knlp_mla_kv_fim")
KNLP_MLA_VOCAB = 50257
GPT2_VOCAB, PADDED_VOCAB = 50257, 50304


def _form(entry: str) -> str:
    low = entry.lower()
    if "ksplice_asym" in low:
        return "ksplice_asym"
    return next((ours for key, ours in KNLP_FORMS if key in low), "knlp_mla")


def _attention(forms: list[str]) -> Any:
    """One variant's name, or the sorted tuple a matrix trains."""
    unique = sorted(set(forms))
    return unique[0] if len(unique) == 1 else tuple(unique)


def knlp_mla(v: Callable[[str], Any], on: Callable[[str], bool]) -> dict[str, Any]:
    """What knlp's MLA models are built with; {} when the file trains none."""
    raw = (v("MLA_VARIANT") or "").strip('"') if on("ENABLE_MLA") else ""
    entries = [e.strip() for e in raw.split(",") if e.strip()]
    if not entries or on("ENABLE_RA_MLA"):
        return {}
    forms = [_form(e) for e in entries]
    exp: dict[str, Any] = {
        "attention": _attention(forms),
        "mla latent": int(v("MLA_D_LATENT") or 256),  # its getattr() fallbacks
        "vocab": KNLP_MLA_VOCAB,
        "bias": True,
        "tied head": True,
    }
    if set(forms) & set(KV_FORMS):
        exp["kvsplice ratio"] = float(v("MLA_COMPRESSION_RATIO") or 0.5)
    if "knlp_mla_kv_fim" in forms:
        exp["kvsplice layers"] = 4
    return exp


def our_mla(run: RunConfig) -> dict[str, Any]:
    """The same values as this project runs them; {} without knlp's MLA."""
    if run.GPT2_ATTENTION_MULTIPLE:
        forms = [
            name
            for name in ("vanilla", "knlp_mla", *KV_FORMS)
            if getattr(run, "GPT2_ATTENTION_ENABLE_" + name.upper(), False)
        ]
    else:
        forms = [run.GPT2_ATTENTION or ""]
    if not any(f.startswith("knlp_mla") for f in forms):
        return {}
    exp: dict[str, Any] = {
        "attention": _attention(forms),
        "mla latent": run.GPT2_KNLP_MLA_LATENT,
        "vocab": PADDED_VOCAB if run.GPT2_PAD_VOCAB else GPT2_VOCAB,
    }
    if set(forms) & set(KV_FORMS):
        exp["kvsplice ratio"] = float(str(run.GPT2_KVSPLICE_RATIO))
    if "knlp_mla_kv_fim" in forms:
        exp["kvsplice layers"] = run.GPT2_KVSPLICE_LAYERS
    return exp
