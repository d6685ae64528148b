"""`make import-knlp`'s report read as a user reads it: what runs first (a dropped
headline feature, a dropped TARGET_EFFECTIVE_BATCH, "this loads as: ..."), knlp's
defaults one line per group; and a GPU-only import on a CPU stopped in one paragraph
before a run folder is made."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from lib.config.knlp import report
from lib.config.run_config import load_run_config
from lib.estimate.verdict import device_problem
from tests.scripts.conftest import make

ASSET = Path(__file__).resolve().parents[1] / "assets" / "knlp" / "gpt2-mla-three-way"


def test_the_report_opens_with_what_loads_and_groups_knlps_defaults(project):
    out = make(project, "import-knlp", f"FILE={ASSET}")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == (
        "this loads as: gpt2 124m, several attention variants (a matrix), adamwspam, no "
        "pruning, 3000 steps, effective batch 256 (TARGET_EFFECTIVE_BATCH, micro-batch chosen "
        "at start), on cpu"
    )
    head = next(i for i, line in enumerate(lines) if line.startswith("knlp defaults applied"))
    assert lines[head] == "knlp defaults applied (34), by where knlp sets them:"
    groups = [line for line in lines[head + 1 :] if line.startswith("  ")]
    assert '  knlp\'s GPT-2 trainer (norm clip 1.0): TRAIN_GRAD_CLIP="1.0"' in groups
    assert "  knlp's MLA models (vocabulary 50257, biases, tied head): GPT2_BIAS=y, " in (
        "\n".join(groups)
    )
    spam = next(g for g in groups if g.startswith("  knlp's AdamWSPAM (lib/optimizers.py): "))
    assert spam.endswith(
        'ADAM_BETA1="0.9", ADAM_BETA2="0.999", ADAM_EPSILON="1e-8", '
        'WEIGHT_DECAY="0.1", ADAM_AMSGRAD=y'
    )
    # every default is in exactly one group: 34 settings in all
    assert sum(g.count("=") - g.split(": ", 1)[1].count('=""') for g in groups) >= 34


VANILLA = {
    "MODEL": "gpt2",
    "GPT2_MODEL": "124m",
    "GPT2_ATTENTION": "vanilla",
    "OPTIMIZER_MODE": "single",
    "OPTIMIZER": "adamw",
    "PRUNING_MODE": "none",
    "GPT2_MAX_ITERS": 10000,
    "HYPER_PARAM": "manual",
    "BATCH_SIZE": 16,
    "GPT2_GRADIENT_ACCUMULATION": 4,
    "DEVICE": "cuda",
}


def test_a_dropped_headline_feature_is_one_line_at_the_top():
    text = "CONFIG_ENABLE_RA_MLA=y\nCONFIG_RA_MLA_LATENT_DIM=64\nCONFIG_MLA_KVSPLICE=y\n"
    lines = report.ordered(["a: knlp format"], text, VANILLA)
    assert lines[0] == (
        "headline dropped: this file switches on RA+MLA, KVSplice, but knlp's code at "
        f"{report.COMMIT[:8]} trains it with plain attention, and so does this import"
    )
    assert lines[1].startswith("this loads as: gpt2 124m, vanilla attention, adamw, no pruning")
    assert report.headline_dropped(text, {**VANILLA, "GPT2_ATTENTION": "ra_mla"}) is None
    assert report.headline_dropped("CONFIG_ENABLE_MLA=n\n", VANILLA) is None


def test_target_effective_batch_is_honoured_or_its_drop_said():
    text = "CONFIG_TARGET_EFFECTIVE_BATCH=512\n"
    line = report.batch_dropped(text, VANILLA)
    assert line is not None and line.startswith("TARGET_EFFECTIVE_BATCH=512 dropped: ")
    assert "trains 16 x 4 = 64 sequences" in line
    auto = {**VANILLA, "HYPER_PARAM": "auto", "TARGET_EFFECTIVE_BATCH": 512}
    assert report.batch_dropped(text, auto) is None
    assert "effective batch 512 (TARGET_EFFECTIVE_BATCH" in report.loads_as(auto)


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU host runs DEVICE=cuda")
def test_a_gpu_only_configuration_on_a_cpu_is_one_paragraph(write_config):
    run = load_run_config([], write_config("CONFIG_DEVICE_CUDA=y"))
    problem = device_problem(run)
    assert problem is not None and "\n" not in problem
    assert problem.startswith("CONFIG_DEVICE_CUDA is set but no CUDA or ROCm device is visible")
    assert "A knlp experiment on a CPU" in problem
    assert (
        device_problem(load_run_config(["DEVICE=cpu"], write_config("CONFIG_DEVICE_CUDA=y")))
        is None
    )


@pytest.mark.slow
@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU host runs DEVICE=cuda")
def test_make_stops_a_gpu_import_before_a_run_folder(project):
    (project / "corpus.txt").write_text("ROMEO: the moon is bright tonight.\n" * 500)
    assert make(project, "defconfig-gpt2-tiny-shakespeare").returncode == 0
    data = "SET=GPT2_DATASET_CUSTOM=y DATA_CUSTOM_PATH=corpus.txt DATA_TOKENIZER_CHAR=y"
    out = make(project, "DEVICE=cuda", data)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "error: CONFIG_DEVICE_CUDA is set but no CUDA" in out.stderr
    assert not (project / "results").exists()
