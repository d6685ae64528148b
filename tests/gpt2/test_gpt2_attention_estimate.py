"""The memory estimate (lib/estimate) for the SDPA gate, gated RA, both
together, the learned alpha and knlp's MLA family, against the measured CPU peak, as
tests/lib/test_estimate.py checks the other variants (measured: within 0.2 %)."""

from __future__ import annotations

import pytest

from lib.bench.memory import measure_peak
from lib.config.run_config import run_config_from_defaults
from lib.estimate import estimate_memory
from lib.hardware.devices import cpu_info

TINY = dict(
    GPT2_N_LAYER=2, GPT2_N_HEAD=4, GPT2_N_EMBD=64, GPT2_BLOCK_SIZE=64, BATCH_SIZE=4, DEVICE_CPU="y"
)
CASES = {
    "sdpa gate bf16": {"GPT2_ATTENTION_SDPA_GATE": "y", "MIXED_PRECISION_DTYPE_BF16": "y"},
    "gated ra": {
        "GPT2_ATTENTION_RA_GATED": "y",
        "GPT2_RA_GATED_LAYERS": 1,
        "GPT2_RA_GATED_HEADS": 2,
    },
    # With dropout the CPU runs SDPA's math path, which keeps the scores.
    "gated ra dropout": {
        "GPT2_ATTENTION_RA_GATED": "y",
        "GPT2_RA_GATED_LAYERS": 2,
        "GPT2_DROPOUT": "0.1",
    },
    # knlp's two switches both on: the output gate on every layer, the branch on one
    "output gate + gated ra": {
        "GPT2_ATTENTION_SDPA_GATE_RA_GATED": "y",
        "GPT2_RA_GATED_LAYERS": 1,
        "GPT2_RA_GATED_HEADS": 2,
    },
    "output gate + gated ra bf16": {
        "GPT2_ATTENTION_SDPA_GATE_RA_GATED": "y",
        "MIXED_PRECISION_DTYPE_BF16": "y",
        "GPT2_RA_GATED_LAYERS": 1,
    },
    "output gate + gated ra dropout": {
        "GPT2_ATTENTION_SDPA_GATE_RA_GATED": "y",
        "GPT2_RA_GATED_LAYERS": 2,
        "GPT2_DROPOUT": "0.1",
    },
    "learned alpha bf16": {
        "GPT2_ATTENTION_RA_LOGIT": "y",
        "RA_MLA_RA_ALPHA_LEARNED": "y",
        "MIXED_PRECISION_DTYPE_BF16": "y",
    },
    # knlp's MLA family (gpt2/kvsplice.py): fim is one MLA and one KVSplice layer here
    "knlp mla": {"GPT2_ATTENTION_KNLP_MLA": "y", "GPT2_KNLP_MLA_LATENT": 32},
    "knlp mla kv bf16": {
        "GPT2_ATTENTION_KNLP_MLA_KV": "y",
        "GPT2_KNLP_MLA_LATENT": 32,
        "MIXED_PRECISION_DTYPE_BF16": "y",
    },
    "knlp mla kv fim dropout": {
        "GPT2_ATTENTION_KNLP_MLA_KV_FIM": "y",
        "GPT2_KNLP_MLA_LATENT": 32,
        "GPT2_KVSPLICE_LAYERS": 1,
        "GPT2_DROPOUT": "0.1",
    },
}


@pytest.mark.parametrize("case", CASES)
def test_estimate_is_close_to_the_measured_cpu_peak(case: str) -> None:
    run = run_config_from_defaults({k: str(v) for k, v in {**TINY, **CASES[case]}.items()})
    est = estimate_memory(run, 512, device_info=cpu_info())
    assert est.total_bytes == pytest.approx(measure_peak(run, 512, steps=2), rel=0.01)
