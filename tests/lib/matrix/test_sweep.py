"""Sweeps: grid and random points, sweep files, validation, and their results."""

from __future__ import annotations

import math

import pytest

from lib.config.kconfig import ConfigError
from lib.matrix import sweep
from lib.matrix.grid import expand
from lib.results.collect import RunRow
from lib.results.sweep import plots, ranking


def test_grid_is_the_product_in_order():
    s = sweep.parse("LEARNING_RATE=1e-4,3e-4,1e-3 BATCH_SIZE=16,32")
    points = s.points()
    assert len(points) == 6
    assert points[0] == [("LEARNING_RATE", "1e-4"), ("BATCH_SIZE", "16")]
    assert points[-1] == [("LEARNING_RATE", "1e-3"), ("BATCH_SIZE", "32")]


def test_random_points_are_reproducible_and_in_range():
    spec = "LEARNING_RATE=1e-4..1e-2:log GPT2_WARMUP_STEPS=0..60 BATCH_SIZE=8,16"
    a = sweep.parse(spec, "random", trials=400, seed=3).points()
    assert a == sweep.parse(spec, "random", trials=400, seed=3).points()
    assert a != sweep.parse(spec, "random", trials=400, seed=4).points()
    lrs = [float(dict(p)["LEARNING_RATE"]) for p in a]
    warm = [dict(p)["GPT2_WARMUP_STEPS"] for p in a]
    assert len(a) == 400 and all(1e-4 <= x <= 1e-2 for x in lrs)
    assert all(w.isdigit() and 0 <= int(w) <= 60 for w in warm)
    # log-uniform: about half the draws below the geometric middle 1e-3
    below = sum(x < 1e-3 for x in lrs) / len(lrs)
    assert 0.42 < below < 0.58
    assert {dict(p)["BATCH_SIZE"] for p in a} == {"8", "16"}


@pytest.mark.parametrize(
    "spec, mode, trials, match",
    [
        ("LEARNING_RATE=1e-4..1e-3", "grid", 0, "needs SWEEP_MODE=random"),
        ("LEARNING_RATE=1e-3..1e-4", "random", 3, "low end must be below the high end"),
        ("LEARNING_RATE=0..1e-3:log", "random", 3, "log range needs a low end above 0"),
        ("LEARNING_RATE=1e-4", "random", 0, "SWEEP_TRIALS"),
        ("lr=1", "grid", 0, "not SYMBOL="),
        ("A=1 A=2", "grid", 0, "listed twice"),
        ("A=1", "bayes", 0, "allowed grid or random"),
    ],
)
def test_malformed_sweeps_are_refused(spec, mode, trials, match):
    with pytest.raises(ConfigError, match=match):
        sweep.parse(spec, mode, trials)


def test_a_misspelt_sweep_symbol_is_refused_with_a_did_you_mean(tmp_path):
    with pytest.raises(ConfigError) as info:
        sweep.parse("LERNING_RATE=1e-4,3e-4 BATCH_SIZE=8,16 XQZW=1,2")
    assert info.value.problems == [
        "SWEEP: LERNING_RATE is not a Kconfig symbol or an alias; did you mean LEARNING_RATE?",
        "SWEEP: XQZW is not a Kconfig symbol or an alias; name a symbol as .config does, "
        "without CONFIG_ (e.g. LEARNING_RATE)",
    ]
    # a sweep file's problem names its line
    path = tmp_path / "lr"
    path.write_text("# batch sizes\nSWEEP_MODE=grid\nLEARNING_RATE=1e-4\nBACTH_SIZE=8,16\n")
    with pytest.raises(ConfigError) as info:
        sweep.from_file(str(path))
    assert info.value.problems == [
        f"{path}:4: BACTH_SIZE is not a Kconfig symbol or an alias; did you mean BATCH_SIZE?"
    ]
    # what an override takes is swept: an alias, an old name, a choice, CONFIG_<symbol>
    s = sweep.parse(
        "LR=1e-4,3e-4 GPT2_COMPILE=y,n GPT2_ATTENTION=vanilla,mla CONFIG_BATCH_SIZE=8,16"
    )
    assert len(s.points()) == 16


def test_sweep_file(tmp_path):
    path = tmp_path / "lr"
    path.write_text(
        "# a comment\nSWEEP_MODE=random\nSWEEP_TRIALS=3  # three runs\n"
        "SWEEP_SEED=7\nLEARNING_RATE=1e-4..1e-3:log\n"
    )
    s = sweep.from_file(str(path))
    assert (s.mode, s.trials, s.seed, len(s.points())) == ("random", 3, 7, 3)
    assert s.record()["log"] == ["LEARNING_RATE"]
    with pytest.raises(ConfigError, match="no sweep file"):
        sweep.from_file("does-not-exist")
    assert sweep.from_file("tiny-lr").points()[0] == [("LEARNING_RATE", "1e-3")]


def test_sweep_runs_are_validated_and_named(matrix_config):
    path = matrix_config()
    points = sweep.parse("LEARNING_RATE=1e-3,3e-3 GPT2_N_LAYER=1,2").points()
    _, planned = expand([], path, points)
    assert [p.run_id for p in planned][1] == "gpt2_adamw_none_learning_rate1e-3_gpt2_n_layer2"
    assert planned[3].config.LEARNING_RATE == 3e-3 and planned[3].config.GPT2_N_LAYER == 2
    with pytest.raises(ConfigError, match=r"LEARNING_RATE=\"50\" is out of range"):
        expand([], path, sweep.parse("LEARNING_RATE=1e-3,50").points())


def test_results_rank_runs_and_plot_each_swept_symbol(tmp_path):
    rows = []
    for lr, ppl in [("1e-3", 30.0), ("3e-4", 20.0), ("1e-4", 25.0), ("3e-3", None)]:
        row = RunRow(
            f"run_{lr}",
            tmp_path,
            "completed" if ppl else "failed",
            best_ppl=ppl,
            final_ppl=ppl and ppl + 1,
        )
        row.overrides = {"LEARNING_RATE": lr, "HAMT_BINDING": "circular"}
        rows.append(row)
    md = ranking(rows, ["LEARNING_RATE"])
    lines = [line for line in md.splitlines() if line.startswith("| ") and line[2].isdigit()]
    assert [line.split(" | ")[1] for line in lines] == ["run_3e-4", "run_1e-4", "run_1e-3"]
    assert "Not ranked (no validation result yet): run_3e-3" in md
    made = plots(rows, ["LEARNING_RATE", "HAMT_BINDING"], ["LEARNING_RATE"], tmp_path)
    assert [p.name for p in made] == ["sweep_learning_rate.png", "sweep_hamt_binding.png"]
    assert all(p.stat().st_size > 1000 for p in made) and math.isfinite(rows[0].best_ppl)
