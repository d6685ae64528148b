"""The matrix defconfigs: each expands, as `make test-matrix-dry-run`
does, to the runs its description promises. The smoke matrix covers every
optimizer, pruning method and attention family, HAMT included; the GPU
matrices are GPT-2 124M on FineWebEdu with the grid's pairs, and the HAMT of
the attention matrix is as large as the GPT-2 it is compared with.
(scripts/smoke.sh trains the smoke matrix for real; this checks the plan.)"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from lib.config.kconfig import ROOT, ConfigError, load_strict
from lib.config.run_config import write_outputs
from lib.matrix.grid import expand
from lib.model import registry

DEFCONFIGS = ROOT / "defconfigs"


def _expand(name: str, tmp_path: Path):
    """scripts/kconfig.py defconfig into tmp_path, then the matrix's expansion."""
    config = tmp_path / ".config"
    write_outputs(load_strict(DEFCONFIGS / name), config, tmp_path / "config.py")
    return expand([], config)[1]


def _described_count(name: str) -> int:
    first = (DEFCONFIGS / name).read_text().splitlines()[0]
    return int(re.search(r"(\d+) (?:tiny CPU )?runs\b", first).group(1))


def _params(run, vocab: int = 50257) -> int:
    family = registry.family(run.MODEL)
    with torch.device("meta"):
        return family.build(family.from_run_config(run, vocab)).num_params(non_embedding=False)


def test_smoke_matrix_covers_every_optimizer_method_and_attention_family(tmp_path):
    runs = [r.config for r in _expand("cpu-smoke-matrix", tmp_path)]
    assert len(runs) == _described_count("cpu-smoke-matrix") == 49
    assert {r.OPTIMIZER for r in runs} == {"adamw", "adamwspam", "adamwprune", "muon"}
    assert {r.PRUNING_METHOD for r in runs} == {"magnitude", "movement", "state"}
    assert {r.GPT2_ATTENTION for r in runs if r.MODEL == "gpt2"} == {
        "vanilla",
        "sdpa_gate",
        "mla",
        "ra_logit",
        "ra_mla",
        "ra_gated",
    }
    assert sum(r.MODEL == "hamt" for r in runs) == 7
    # reciprocal attention really on (alpha 0 would be plain MLA), ramp inside the run
    assert all(r.RA_MLA_RA_ALPHA == 0.5 for r in runs if r.GPT2_ATTENTION in ("ra_logit", "ra_mla"))
    assert all(r.PRUNING_RAMP_END < r.GPT2_MAX_ITERS for r in runs)
    # tiny and offline: characters of the embedded corpus, on the CPU
    assert {(r.DATA_TOKENIZER, r.GPT2_DATASET, r.DEVICE) for r in runs} == {
        ("char", "shakespeare", "cpu")
    }
    sizes = {m: max(_params(r, vocab=65) for r in runs if r.MODEL == m) for m in ("gpt2", "hamt")}
    assert sizes["gpt2"] < 50_000 and sizes["hamt"] < 1_200_000, sizes  # 2 x 32; 4 x 128


def test_optimizer_matrix_is_every_allowed_pair_at_50_70_90(tmp_path):
    runs = [r.config for r in _expand("gpt2-optimizer-matrix", tmp_path)]
    assert len(runs) == _described_count("gpt2-optimizer-matrix") == 24
    pairs = {(r.OPTIMIZER, r.PRUNING_METHOD or "none", r.PRUNING_TARGET_SPARSITY) for r in runs}
    masking = ("adamw", "adamwspam", "muon")
    expected = {(o, "none", None) for o in masking}
    expected |= {
        (o, m, s) for o in masking for m in ("magnitude", "movement") for s in (0.5, 0.7, 0.9)
    }
    expected |= {("adamwprune", "state", s) for s in (0.5, 0.7, 0.9)}
    assert pairs == expected
    assert {(r.GPT2_MODEL, r.GPT2_DATASET, r.GPT2_BLOCK_SIZE) for r in runs} == {
        ("124m", "finewebedu", 1024)
    }


def test_attention_matrix_compares_hamt_of_the_same_size(tmp_path):
    runs = [r.config for r in _expand("gpt2-attention-matrix", tmp_path)]
    assert len(runs) == _described_count("gpt2-attention-matrix") == 4
    assert [(r.MODEL, r.GPT2_ATTENTION) for r in runs] == [
        ("gpt2", "vanilla"),
        ("gpt2", "mla"),
        ("gpt2", "ra_mla"),
        ("hamt", None),
    ]
    gpt2, hamt = _params(runs[0]), _params(runs[3])
    assert abs(hamt - gpt2) / gpt2 < 0.02, (gpt2, hamt)  # 124.5M and 123.9M
    assert {(r.GPT2_DATASET, r.GPT2_BLOCK_SIZE, r.BATCH_SIZE) for r in runs} == {
        ("finewebedu", 1024, 32)
    }


@pytest.mark.parametrize(
    "word, problem",
    [
        ("hamt:HAMT_N_LAYER", "is not family or family:SYMBOL=value"),
        ("hamt:HAMT_N_LAYER=0", "CONFIG_HAMT_N_LAYER=0 was not applied"),  # below its range 1..128
        (
            "hamt:GPT2_N_LAYER=2",
            "CONFIG_GPT2_N_LAYER=2 was not applied",
        ),  # GPT-2's, hidden for HAMT
    ],
)
def test_a_familys_settings_are_checked_like_any_override(tmp_path, word, problem):
    text = (
        DEFCONFIGS / "gpt2-tiny-shakespeare"
    ).read_text() + f'CONFIG_MATRIX_MODELS="gpt2 {word}"\n'
    (tmp_path / "defconfig").write_text(text)
    write_outputs(load_strict(tmp_path / "defconfig"), tmp_path / ".config", tmp_path / "config.py")
    with pytest.raises(ConfigError) as err:
        expand([], tmp_path / ".config")
    assert problem in str(err.value)
