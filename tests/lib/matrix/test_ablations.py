"""The HAMT ablation defconfigs: each loads as `make defconfig-<name>` writes it
and expands to one run per swept value, named by it, the rest of the run as
hamt-small (GPU) or hamt-tiny-shakespeare with fewer iterations (CPU)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lib.config.kconfig import ROOT, load_strict
from lib.config.run_config import load_run_config, write_outputs
from lib.matrix.grid import expand

DEFCONFIGS = ROOT / "defconfigs"
# ablation -> (swept symbol, values in run order as the run config types them)
ABLATIONS = {
    "slots": ("HAMT_NUM_SLOTS", [4, 8, 16]),
    "aux": ("HAMT_AUX_WEIGHT", [0.05, 0.1, 0.2]),
    "hcm": ("HAMT_HCM_MULT", [2, 3, 4]),
    "binding": ("HAMT_BINDING", ["elementwise", "circular"]),
    "adaptive": ("HAMT_ADAPTIVE_SLOTS", [False, True]),
}
# Symbols a swept value shows (their defaults then appear in the run's values).
SHOWN = {"adaptive": {"HAMT_ADAPTIVE_SLOTS_TOPK", "HAMT_ADAPTIVE_SLOTS_BALANCE"}}
# defconfig prefix -> the single-run defconfig it must otherwise match
SIZES = {"hamt-ablation-": "hamt-small", "hamt-tiny-ablation-": "hamt-tiny-shakespeare"}


def _word(value: object) -> str:
    """How a value is written in MATRIX_ABLATION and the run id: a bool as y/n."""
    return ("y" if value else "n") if isinstance(value, bool) else str(value)


def _as_make_defconfig_writes(name: str, tmp_path: Path) -> Path:
    """scripts/kconfig.py defconfig, into tmp_path instead of the project's .config."""
    config = tmp_path / ".config"
    write_outputs(load_strict(DEFCONFIGS / name), config, tmp_path / "config.py")
    return config


def test_every_hamt_ablation_defconfig_is_covered():
    names = {p.name for p in DEFCONFIGS.glob("hamt*ablation*")}
    assert names == {prefix + a for prefix in SIZES for a in ABLATIONS}


@pytest.mark.parametrize("prefix", SIZES)
@pytest.mark.parametrize("ablation", ABLATIONS)
def test_ablation_expands_to_one_run_per_value(prefix, ablation, tmp_path):
    name, (symbol, values) = prefix + ablation, ABLATIONS[ablation]
    first = (DEFCONFIGS / name).read_text().splitlines()[0]
    assert first.startswith("# ") and f"{len(values)} runs" in first
    base, runs = expand([], _as_make_defconfig_writes(name, tmp_path))
    assert base.MODEL == "hamt" and base.MATRIX_ABLATION.startswith(f"{symbol}=")
    assert [r.run_id for r in runs] == [
        f"hamt_adamw_none_{symbol.lower()}{_word(v)}" for v in values
    ]
    assert [r.config.values.get(symbol) for r in runs] == values
    reference = load_run_config([], DEFCONFIGS / SIZES[prefix]).values
    members = {f"{symbol}_{str(v).upper()}" for v in values}  # a choice's y/n members
    for run in runs:
        differs = {k for k, v in run.config.values.items() if reference.get(k) != v}
        assert differs <= {symbol, "MATRIX_ABLATION"} | members | SHOWN.get(ablation, set()) | (
            {"GPT2_MAX_ITERS", "GPT2_EVAL_INTERVAL", "TRAIN_EVAL_ITERS", "GPT2_WARMUP_STEPS"}
            if "tiny" in prefix
            else set()
        )


def test_tiny_ablations_are_short_cpu_runs(tmp_path):
    for ablation in ABLATIONS:
        base, runs = expand(
            [], _as_make_defconfig_writes(f"hamt-tiny-ablation-{ablation}", tmp_path)
        )
        assert base.GPT2_MAX_ITERS == 100 and base.HAMT_N_EMBD == 128
        assert all(r.config.GPT2_MAX_ITERS == 100 for r in runs)
