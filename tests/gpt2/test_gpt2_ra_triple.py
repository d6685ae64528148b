"""The baseline / SDPA-gate / gated-RA triple defconfigs: each expands, as
`make test-matrix-dry-run` does, to three runs with distinct ids, set as the
original project's published run (knlp defconfig gpt2-ra-sdpa-ablation,
commit c8bc9d58) where our symbols allow."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from lib.config.kconfig import ROOT, load_strict
from lib.config.run_config import write_outputs
from lib.matrix import plan
from lib.matrix.grid import expand

DEFCONFIGS = ROOT / "defconfigs"
RUN_IDS = ["gpt2_adamwspam_none", "gpt2_adamwspam_sdpagate_none", "gpt2_adamwspam_ragated_none"]


def _expand(name: str, tmp_path: Path):
    """scripts/kconfig.py defconfig into tmp_path, then the matrix's expansion."""
    config = tmp_path / ".config"
    write_outputs(load_strict(DEFCONFIGS / name), config, tmp_path / "config.py")
    return expand([], config)


@pytest.mark.parametrize("name", ["gpt2-ra-gate-triple", "gpt2-tiny-ra-gate-triple"])
def test_triple_is_one_matrix_of_three_distinct_runs(name: str, tmp_path: Path, capsys) -> None:
    base, runs = _expand(name, tmp_path)
    assert [r.run_id for r in runs] == RUN_IDS
    assert [r.config.GPT2_ATTENTION for r in runs] == ["vanilla", "sdpa_gate", "ra_gated"]
    for run in runs:  # everything else is shared
        assert (run.config.OPTIMIZER, run.config.GPT2_DROPOUT) == ("adamwspam", 0.1)
        assert run.config.SPAM_THETA == 50.0
    first_line = (DEFCONFIGS / name).read_text().splitlines()[0]
    assert first_line.startswith("# ") and "3 runs" in first_line
    plan.show(base, runs)  # the dry run's table: memory and time estimated for every run
    table = capsys.readouterr().out
    assert "3 runs" in table and all(run_id in table for run_id in RUN_IDS)


def test_gpu_triple_matches_the_published_runs_settings(tmp_path: Path) -> None:
    _, runs = _expand("gpt2-ra-gate-triple", tmp_path)
    run = runs[2].config
    assert (run.GPT2_MODEL, run.GPT2_BLOCK_SIZE, run.GPT2_PAD_VOCAB) == ("124m", 1024, True)
    assert (run.GPT2_RA_GATED_LAYERS, run.GPT2_RA_GATED_HEADS, run.GPT2_RA_GATED_GATE_INIT) == (
        3,
        1,
        0.0,
    )
    assert run.DATA_TOKENIZER == "gpt2" and run.GPT2_DATASET == "finewebedu"
    # 4 GPUs x micro-batch 128 x 1 there; 32 x 16 on one device here.
    assert run.BATCH_SIZE * run.GPT2_GRADIENT_ACCUMULATION == 512
    assert (run.GPT2_MAX_ITERS, run.TRAIN_MAX_TIME) == (10000, 7200)
    assert (run.LEARNING_RATE, run.GPT2_MIN_LR, run.GPT2_WARMUP_STEPS) == (6e-4, 6e-5, 2000)
    assert (run.GPT2_EVAL_INTERVAL, run.TRAIN_EVAL_ITERS) == (50, 200)
    assert (run.SPAM_INTERVAL, run.MIXED_PRECISION_DTYPE) == (1000, "bf16")
    assert not run.COMPILE_MODEL


def test_gpu_triple_parameter_counts(tmp_path: Path) -> None:
    """124M with the padded vocabulary, then what the gate and the branch add:
    12 x (768 x 768 + 768) and 3 x (1 + 64 x 768 + 768 + 2 x 768)."""
    from gpt2 import FAMILY

    _, runs = _expand("gpt2-ra-gate-triple", tmp_path)
    counts = []
    for run in runs:
        with torch.device("meta"):
            model = FAMILY.build(FAMILY.from_run_config(run.config, 50257))
        counts.append(sum(p.numel() for p in model.parameters()))
    assert counts == [124_475_904, 124_475_904 + 7_087_104, 124_475_904 + 154_371]
