"""Which run a result is compared with (lib/results/collect.py pick_baseline and
apply_baseline): a finished run, its own model's, the same seed where there is one,
and never a run of other tokens."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.lib.results.conftest import make_run


def test_no_delta_against_a_baseline_of_other_tokens(tmp_path):
    """Perplexity is per token: a run on GPT-2's BPE against a baseline on a
    5,520-token BPE got a delta of -89.5 %, which says nothing about the method."""
    from lib.results.collect import apply_baseline, collect, pick_baseline

    root = tmp_path / "matrix_t"
    make_run(root, "gpt2_adamw_none", 100.0, tokenizer="bpe", dataset="shakespeare")
    make_run(root, "gpt2_adamw_magnitude_50", 110.0, method="magnitude", tokenizer="bpe")
    make_run(
        root,
        "gpt2_adamw_magnitude_90",
        10.5,
        method="magnitude",
        sparsity="0.9",
        tokenizer="gpt2",
        dataset="shakespeare",
    )
    rows, _ = collect(root)
    apply_baseline(rows, pick_baseline(rows, None))
    by = {r.run_id: r for r in rows}
    assert by["gpt2_adamw_none"].delta_pct == pytest.approx(0.0)
    for other in ("gpt2_adamw_magnitude_50", "gpt2_adamw_magnitude_90"):
        assert by[other].delta_pct is None, other  # no dataset, or another tokenizer
        assert "no delta %" in by[other].problems[-1] and "nats/char" in by[other].problems[-1]
    assert (
        "(gpt2, shakespeare) are not the baseline's (bpe, shakespeare)"
        in (by["gpt2_adamw_magnitude_90"].problems[-1])
    )


def _row(
    run_id, ppl, status="completed", seed=None, model="gpt2", optimizer="adamw", pruning="none"
):
    from lib.results.collect import RunRow

    return RunRow(
        run_id,
        Path(run_id),
        status,
        model=model,
        optimizer=optimizer,
        pruning=pruning,
        variant="vanilla",
        seed=seed,
        best_ppl=ppl,
    )


def test_the_baseline_is_a_finished_run_and_each_seed_is_compared_with_its_own():
    """A failed seed 1 was the baseline of every delta %; and every seed was compared
    with the baseline's seed 1, where the seed table pairs seed with seed."""
    from lib.results.collect import apply_baseline, pick_baseline

    rows = [
        _row("gpt2_adamw_none_s1", 90.0, "failed", 1),
        _row("gpt2_adamw_none_s2", 100.0, seed=2),
        _row("gpt2_adamw_none_s3", 110.0, seed=3),
        _row("gpt2_adamw_magnitude_50_s1", 120.0, seed=1, pruning="magnitude"),
        _row("gpt2_adamw_magnitude_50_s2", 105.0, seed=2, pruning="magnitude"),
        _row("gpt2_adamw_magnitude_50_s3", 121.0, seed=3, pruning="magnitude"),
    ]
    baselines = pick_baseline(rows, None)
    assert baselines["gpt2"].run_id == "gpt2_adamw_none_s2"
    apply_baseline(rows, baselines)
    delta = {r.run_id: r.delta_pct for r in rows}
    assert delta["gpt2_adamw_magnitude_50_s2"] == pytest.approx(5.0)  # against none_s2
    assert delta["gpt2_adamw_magnitude_50_s3"] == pytest.approx(10.0)  # against none_s3
    assert delta["gpt2_adamw_magnitude_50_s1"] == pytest.approx(20.0)  # s1 failed: none_s2
    assert delta["gpt2_adamw_none_s3"] == pytest.approx(0.0)


def test_a_named_baseline_is_its_own_models_and_the_others_keep_theirs():
    from lib.results.collect import pick_baseline

    rows = [
        _row("gpt2_adamw_none", 100.0),
        _row("gpt2_adamwspam_none", 98.0, optimizer="adamwspam"),
        _row("hamt_adamw_none", 80.0, model="hamt"),
    ]
    baselines = pick_baseline(rows, "gpt2_adamwspam_none")
    assert {m: r.run_id for m, r in baselines.items()} == {
        "gpt2": "gpt2_adamwspam_none",
        "hamt": "hamt_adamw_none",  # not compared against a GPT-2 run
    }
