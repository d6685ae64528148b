"""`make eval`, `make export` and `make eval-baseline` as a user types them."""

from __future__ import annotations

import json

import pytest

from tests.scripts.conftest import make

TINY = (
    "SET=GPT2_DATASET_CUSTOM=y DATA_CUSTOM_PATH=corpus.txt DATA_TOKENIZER_CHAR=y "
    "GPT2_N_LAYER=1 GPT2_N_HEAD=2 GPT2_N_EMBD=32 GPT2_BLOCK_SIZE=32 BATCH_SIZE=4 "
    "GPT2_EVAL_INTERVAL=2 TRAIN_EVAL_ITERS=1 GPT2_WARMUP_STEPS=1"
)


@pytest.mark.slow
def test_make_eval_and_export_a_trained_run(project):
    (project / "corpus.txt").write_text("ROMEO: the moon is bright tonight.\n" * 400)
    (project / "held_out.txt").write_text("ROMEO: this is the night.\n" * 20)
    assert make(project, "defconfig-gpt2-tiny-shakespeare").returncode == 0
    trained = make(project, "MAX_ITERS=2", "RUN_NAME=ev", TINY)
    assert trained.returncode == 0, trained.stdout + trained.stderr

    out = make(project, "eval", "SET=EVAL_TEXT_FILE=held_out.txt EVAL_STRIDE=16")
    assert out.returncode == 0, out.stdout + out.stderr
    record = json.loads((project / "results" / "ev" / "eval.json").read_text())
    assert set(record["sets"]) == {"val", "text"} and record["settings"]["stride"] == 16
    assert "eval text: ppl" in out.stdout and "wrote " in out.stdout

    offline = make(project, "eval", "SET=EVAL_WIKITEXT2=y", env={"HF_HUB_OFFLINE": "1"})
    assert offline.returncode != 0 and "CONFIG_EVAL_WIKITEXT2" in offline.stderr
    assert json.loads((project / "results" / "ev" / "eval.json").read_text()) == record

    exported = make(project, "export", "CHECKPOINT=latest")
    assert exported.returncode == 0, exported.stderr
    assert (
        json.loads((project / "results" / "ev" / "hf" / "config.json").read_text())["n_layer"] == 1
    )

    missing = make(project, "eval-baseline")
    assert missing.returncode != 0 and "BASELINE_MODEL= is empty" in missing.stderr


@pytest.mark.slow
def test_make_eval_baselines_skips_missing_folders_and_results_compare_on_bits_per_byte(project):
    from tests.lib.eval.hf_models import build

    model, tok = build("gpt_neox", 32, "unused")
    model.save_pretrained(project / "models" / "tiny-neox")
    tok.save_pretrained(project / "models" / "tiny-neox")
    (project / "list").write_text("tiny-neox org/tiny\nabsent EleutherAI/pythia-160m\n")
    (project / "held_out.txt").write_text("ROMEO: this is the night, café.\n" * 20)
    assert make(project, "defconfig-gpt2-tiny-shakespeare").returncode == 0
    out = make(
        project,
        "eval-baselines",
        "SET=EVAL_BASELINES=list EVAL_TEXT_FILE=held_out.txt EVAL_VAL=n EVAL_STRIDE=16",
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "eval-baselines tiny-neox: evaluated: baseline-tiny-neox" in out.stdout
    fetch = f"hf download EleutherAI/pythia-160m --local-dir {project / 'models' / 'absent'}"
    assert "eval-baselines absent: skipped" in out.stdout and fetch in out.stdout
    record = json.loads((project / "results" / "baseline-tiny-neox" / "eval.json").read_text())
    assert record["model"]["family"] == "gpt_neox" and record["sets"]["text"]["stride"] == 16

    table = make(project, "results", "RESULTS=results")
    assert table.returncode == 0, table.stdout + table.stderr
    assert (
        "## Comparison on bits per byte" in table.stdout
        and "| baseline-tiny-neox |" in table.stdout
    )
