"""lm-eval on a trained run: the scores in its eval.json beside `make eval`'s
sets, in `make results`, and after training (LM_EVAL_AT_END)."""

from __future__ import annotations

import math

import lm_eval
import pytest

import scripts.train as train
from lib.eval import downstream
from lib.eval.suite import evaluate_run
from lib.results import tables
from lib.results.collect import read_run
from lib.run.eval_record import load_eval
from lib.train.naming import create_run_dir
from lib.train.trainer import Trainer
from tests.lib.eval.test_eval_suite import checkpoint_model
from tests.lib.eval.test_harness import (
    BLOCK,
    TASKS,
    hand_multiple_choice,
    hand_rolling,
    local_data,  # noqa: F401 (an autouse fixture)
)


@pytest.fixture
def run_dir(tiny_run):
    """A char-level run trained for 6 steps (its tokenizer has no end-of-text)."""
    run = tiny_run(GPT2_MAX_ITERS=6, GPT2_EVAL_INTERVAL=3, RUN_NAME="lm")
    path = create_run_dir(run)
    Trainer(run, path, log=lambda _: None).train()
    return path


def test_scores_join_the_sets_in_eval_json_and_the_results_table(run_dir, tiny_run):
    cfg = tiny_run(LM_EVAL_INCLUDE_PATH=str(TASKS), EVAL_BATCH_SIZE=3)
    evaluate_run(run_dir, "best", cfg, log=lambda _: None)  # `make eval` first
    lines: list[str] = []
    section = downstream.evaluate_run_tasks(
        run_dir, "best", cfg, "kconfig_llm_mc, kconfig_llm_rolling", lines.append
    )
    model, tok = checkpoint_model(run_dir)
    mc, rolling = hand_multiple_choice(model, tok), hand_rolling(model, tok, BLOCK)
    scores = section["tasks"]
    assert scores["kconfig_llm_mc"]["acc"]["value"] == pytest.approx(mc["acc"], abs=1e-12)
    assert scores["kconfig_llm_mc"]["acc_norm"]["value"] == pytest.approx(mc["acc_norm"], abs=1e-12)
    assert math.log(scores["kconfig_llm_rolling"]["word_perplexity"]["value"]) == pytest.approx(
        math.log(rolling["word_perplexity"]), rel=1e-6
    )
    assert section["model"]["step"] == 6 and section["settings"]["batch_size"] == 3
    assert section["settings"]["tasks"] == ["kconfig_llm_mc", "kconfig_llm_rolling"]
    assert any(line.startswith("lm-eval kconfig_llm_mc: acc ") for line in lines)
    # The same through lm-eval's own entry point and the registered model name.
    results = lm_eval.simple_evaluate(
        model="kconfig-llm",
        model_args=f"run={run_dir},checkpoint=best",
        tasks=["kconfig_llm_mc"],
        task_manager=downstream.task_manager(str(TASKS), defaults=False),
        log_samples=False,
    )
    assert results["results"]["kconfig_llm_mc"]["acc,none"] == pytest.approx(mc["acc"], abs=1e-12)

    record = load_eval(run_dir)
    assert record is not None and set(record["sets"]) == {"val"} and record["lm_eval"] == section
    evaluate_run(run_dir, "latest", cfg, log=lambda _: None)  # `make eval` again keeps it
    assert load_eval(run_dir)["lm_eval"] == section

    row = read_run(run_dir)
    assert row.scores == {
        "kconfig_llm_mc acc_norm": mc["acc_norm"],
        "kconfig_llm_rolling word_perplexity": pytest.approx(rolling["word_perplexity"], rel=1e-5),
    }
    table = tables.markdown([row], {})
    header = next(line for line in table.splitlines() if line.startswith("| run"))
    assert "| kconfig_llm_mc acc_norm | kconfig_llm_rolling word_perplexity |" in header
    assert f"| {mc['acc_norm']:.3f} |" in table


def test_a_run_without_eval_json_gets_one_with_no_sets(run_dir, tiny_run):
    cfg = tiny_run(LM_EVAL_INCLUDE_PATH=str(TASKS), LM_EVAL_LIMIT=2)
    downstream.evaluate_run_tasks(run_dir, "latest", cfg, "kconfig_llm_mc", lambda _: None)
    record = load_eval(run_dir)
    assert record is not None and record["sets"] == {} and record["run_id"] == "lm"
    assert record["lm_eval"]["samples"] == {"kconfig_llm_mc": 2}
    assert record["lm_eval"]["settings"]["limit"] == 2
    assert read_run(run_dir).status == "completed"  # the results table reads the file


@pytest.mark.slow
def test_lm_eval_at_end_scores_the_run_and_a_failure_does_not_raise(run_dir, tiny_run):
    train.lm_eval_at_end(
        run_dir, tiny_run(LM_EVAL_TASKS="kconfig_llm_mc", LM_EVAL_INCLUDE_PATH=str(TASKS))
    )
    record = load_eval(run_dir)
    assert record is not None and set(record["lm_eval"]["tasks"]) == {"kconfig_llm_mc"}
    assert record["lm_eval"]["model"]["checkpoint"] == "best"

    train.lm_eval_at_end(
        run_dir, tiny_run(LM_EVAL_TASKS="kconfig_llm_nope", LM_EVAL_INCLUDE_PATH=str(TASKS))
    )
    log = (run_dir / "output.log").read_text()
    assert (
        "lm-eval after training failed: ValueError: unknown lm-eval task(s): "
        "kconfig_llm_nope (did you mean kconfig_llm_mc" in log
    )
    assert load_eval(run_dir) == record  # the earlier scores stay
