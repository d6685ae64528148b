"""`make lm-eval` and LM_EVAL_AT_END as a user types them, offline included."""

from __future__ import annotations

import json
import shutil

import pytest

from tests.lib.conftest import synthetic_corpus
from tests.lib.eval.test_harness import TASKS
from tests.scripts.conftest import make, project  # noqa: F401 (a fixture)

TINY = (
    "SET=GPT2_DATASET_CUSTOM=y DATA_CUSTOM_PATH=corpus.txt DATA_TOKENIZER_CHAR=y "
    "GPT2_N_LAYER=1 GPT2_N_HEAD=2 GPT2_N_EMBD=32 GPT2_BLOCK_SIZE=32 BATCH_SIZE=4 "
    "GPT2_EVAL_INTERVAL=2 TRAIN_EVAL_ITERS=1 GPT2_WARMUP_STEPS=1 LM_EVAL_AT_END=y LM_EVAL_TASKS=kconfig_llm_mc "
    "LM_EVAL_INCLUDE_PATH=tests/assets/lm_eval_task"
)


@pytest.mark.slow
def test_make_lm_eval_after_training_on_demand_and_offline(project, tmp_path):  # noqa: F811
    shutil.copytree(TASKS, project / "tests" / "assets" / "lm_eval_task")
    synthetic_corpus(project / "corpus.txt", lines=400)
    hf = {"HF_HOME": str(tmp_path / "hf"), "HF_DATASETS_CACHE": str(tmp_path / "hf" / "datasets")}
    offline = {**hf, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    assert make(project, "defconfig-gpt2-tiny-shakespeare").returncode == 0
    trained = make(project, "MAX_ITERS=2", "RUN_NAME=lm", TINY, env=offline)
    assert trained.returncode == 0, trained.stdout + trained.stderr
    eval_json = project / "results" / "lm" / "eval.json"
    at_end = json.loads(eval_json.read_text())["lm_eval"]
    assert set(at_end["tasks"]) == {"kconfig_llm_mc"} and at_end["model"]["step"] == 2
    assert "lm-eval kconfig_llm_mc: acc " in (project / "results" / "lm" / "output.log").read_text()

    out = make(
        project,
        "lm-eval",
        "TASKS=kconfig_llm_rolling",
        "SET=LM_EVAL_INCLUDE_PATH=tests/assets/lm_eval_task",
        env=offline,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    record = json.loads(eval_json.read_text())
    assert set(record["lm_eval"]["tasks"]) == {"kconfig_llm_rolling"}
    table = make(project, "results", "RESULTS=results")
    assert "kconfig_llm_rolling word_perplexity" in table.stdout, table.stdout + table.stderr

    # "At once" is a decision, not a wall-clock bound: offline, the hub is never asked
    # (test_harness.py's test_hub_task_offline_fails_at_once_with_what_to_do proves it
    # in-process); here the command fails with that message and changes no record.
    hub = make(project, "lm-eval", "TASKS=hellaswag", env=offline)
    assert hub.returncode != 0
    assert (
        "error: lm-eval task(s) hellaswag read Rowan/hellaswag from the Hugging Face hub"
        in hub.stderr
    ), hub.stderr
    assert "HF_HUB_OFFLINE and HF_DATASETS_OFFLINE are set" in hub.stderr, hub.stderr
    assert json.loads(eval_json.read_text()) == record
