"""knlp's MLA family in a knlp file: which of gpt2/kvsplice.py's variants it trains.

knlp's trainer (gpt2/trainers/vanilla.py create_model) builds GPT2_MLA,
GPT2_MLA_KV or GPT2_MLA_KV_FIM when ENABLE_MLA is on and MLA_VARIANT is not
empty, before it looks at RGSA or GPT2_KNLP; its runner
(scripts/run_test_matrix.py) trains one run per comma-separated entry of
MLA_VARIANT. One entry selects that variant here; several are a test matrix
over them (GPT2_ATTENTION_MULTIPLE, run by `make test-matrix`).
"""

from __future__ import annotations

import kconfiglib

from lib.config.knlp.names_attention import MLA_BASE, mla_form
from lib.config.knlp.translate_optim import knlp_value, unquote

# Our variants of knlp's three, in the order menus list them (gpt2/variants.py)
OURS = (MLA_BASE, "knlp_mla_kv", "knlp_mla_kv_fim")
# knlp's MLA_KV_FIM_LAYERS is no symbol of its Kconfig: its trainer's default always
KNLP_KV_LAYERS = "4"


def mla_entries(raw: str) -> list[str]:
    """MLA_VARIANT's entries as knlp's runner splits them."""
    return [e.strip() for e in unquote(raw).split(",") if e.strip()]


class MlaRules:
    """Mixed into translate.py's _Translation, which provides what is declared here."""

    knlp: kconfiglib.Kconfig
    features: dict[str, list[str]]
    notes: dict[str, list[str]]

    def assign(self, ours: str, value: str, knlp_name: str, where: str = "") -> None:
        raise NotImplementedError

    def _origin(self, name: str) -> str:
        raise NotImplementedError

    def knlp_mla(self) -> bool:
        """Select (or enable in a matrix) knlp's MLA variants; True when the file
        trains knlp's MLA family (the caller then sets no other attention)."""
        knlp = self.knlp.syms
        if knlp["ENABLE_MLA"].tri_value != 2:
            return False
        entries = mla_entries(knlp_value(knlp["MLA_VARIANT"]) or "")
        if not entries:
            self.notes[
                "ENABLE_MLA with an empty MLA_VARIANT: knlp's trainer builds its other attention"
            ].append("ENABLE_MLA")
            return False
        if knlp["ENABLE_RA_MLA"].tri_value == 2:
            self.features["knlp's MLA (ENABLE_MLA) together with RA+MLA (ENABLE_RA_MLA)"].append(
                "ENABLE_MLA"
            )
            return True
        forms: list[str] = []
        for entry in entries:
            form = mla_form(entry)
            if form is None:
                self.features["knlp's asymmetric split-KV MLA (MLA_VARIANT ksplice_asym)"].append(
                    "MLA_VARIANT"
                )
                continue
            if entry.lower() not in ("mla", "mla_kv", "mla_kv_fim"):
                self.notes[
                    "knlp's trainer matches MLA_VARIANT entries by substring (mla_kv_fim, "
                    "then mla_kv, else its base MLA)"
                ].append(f"{entry} -> {form}")
            if form in forms:
                self.notes["an MLA_VARIANT entry given twice trains once here"].append(entry)
            else:
                forms.append(form)
        if not forms:
            return True
        origin = self._origin("MLA_VARIANT")
        if len(forms) == 1:
            self.assign("GPT2_ATTENTION_" + forms[0].upper(), "y", "MLA_VARIANT", origin)
        else:
            self.assign("GPT2_ATTENTION_MULTIPLE", "y", "MLA_VARIANT", origin)
            for ours in ("vanilla", *OURS):
                on = "y" if ours in forms else "n"
                self.assign("GPT2_ATTENTION_ENABLE_" + ours.upper(), on, "MLA_VARIANT", origin)
            self.notes[
                "knlp's runner trains one run per MLA_VARIANT entry: `make test-matrix` here"
            ].append("MLA_VARIANT")
        if any(f != MLA_BASE for f in forms):
            ratio = knlp_value(knlp["MLA_COMPRESSION_RATIO"]) or '"0.5"'
            self.assign("GPT2_KVSPLICE_RATIO", ratio, "MLA_COMPRESSION_RATIO")
        if "knlp_mla_kv_fim" in forms:
            self.assign(
                "GPT2_KVSPLICE_LAYERS",
                KNLP_KV_LAYERS,
                "MLA_KV_FIM_LAYERS",
                "knlp code (its trainer's default: MLA_KV_FIM_LAYERS is no Kconfig symbol)",
            )
        return True
