"""knlp test matrices run by run: each optimizer with the values knlp's code gives it
(MATRIX_OPTIMIZER_SETTINGS), AdamWPrune on its runner's schedule inside the matrix,
knlp's magnitude pruning on its own schedule; check.py's per-run comparison.
The knlp-format files are written for these tests."""

from __future__ import annotations

import pytest

from lib.config.kconfig import ConfigError
from lib.config.run_config import RunConfig, config_text, load_valid, typed_values
from lib.knlpcheck.optim import knlp_optimizer, our_matrix
from lib.knlpcheck.prune import knlp_magnitude, knlp_state_steps
from lib.matrix.grid import expand
from tests.lib.config.knlp_files import HEAD, magnitude_pruner, stand_in_checkout

GRID = [
    *HEAD[:3],
    "CONFIG_OPTIMIZER_MODE_MULTIPLE=y",
    "CONFIG_OPTIMIZER_ENABLE_SGD=n",
    "CONFIG_OPTIMIZER_ENABLE_ADAM=n",
    "CONFIG_OPTIMIZER_ENABLE_ADAMW=y",
    "CONFIG_OPTIMIZER_ENABLE_ADAMWADV=n",
    "CONFIG_OPTIMIZER_ENABLE_ADAMWSPAM=y",
    "CONFIG_OPTIMIZER_ENABLE_ADAMWPRUNE=y",
    "CONFIG_PRUNING_MODE_MULTIPLE=y",
    "CONFIG_PRUNING_ENABLE_NONE=n",
    "CONFIG_PRUNING_ENABLE_MAGNITUDE=y",
    "CONFIG_PRUNING_ENABLE_MOVEMENT=n",
    "CONFIG_PRUNING_ENABLE_STATE=y",
    "CONFIG_SPARSITY_ENABLE_50=y",
    "CONFIG_SPARSITY_ENABLE_70=n",
    "CONFIG_SPARSITY_ENABLE_90=y",
    "CONFIG_PRUNING_WARMUP=200",
    "CONFIG_GPT2_MAX_ITERS=4000",
    "CONFIG_GPT2_ADAMWPRUNE_VARIANT_BITTER0=n",
    "CONFIG_GPT2_ADAMWPRUNE_VARIANT_BITTER7=y",
    'CONFIG_DEVICE="cpu"',
]


def planned_runs(write_config, tmp_path, *lines: str):
    notes: list[str] = []
    kconf = load_valid(write_config(*GRID, *lines), notes)
    path = tmp_path / "matrix.config"
    path.write_text(config_text(kconf))
    base, planned = expand([], path)
    return base, planned, notes


def test_each_optimizer_of_a_knlp_matrix_runs_with_knlps_own_values(write_config, tmp_path):
    base, planned, notes = planned_runs(write_config, tmp_path)
    # AdamWSPAM uses AMSGrad, AdamW does not (the shared value), AdamWPrune decays 0
    assert base.MATRIX_OPTIMIZER_SETTINGS is not None
    assert base.MATRIX_OPTIMIZER_SETTINGS.startswith("adamwspam:ADAM_AMSGRAD=y adamwprune:")
    runs = {p.run_id: p.config for p in planned}
    assert sorted(runs) == [
        "gpt2_adamw_magnitude_50",
        "gpt2_adamw_magnitude_90",
        "gpt2_adamwprune_bitter7_state_50",
        "gpt2_adamwprune_bitter7_state_90",
        "gpt2_adamwspam_magnitude_50",
        "gpt2_adamwspam_magnitude_90",
    ]
    settings = {
        rid: (r.WEIGHT_DECAY, r.ADAM_AMSGRAD, r.PRUNING_FREQUENCY, r.PRUNING_WARMUP)
        for rid, r in runs.items()
        if rid.endswith("_50")
    }
    assert settings == {
        "gpt2_adamw_magnitude_50": (0.1, False, 1, 201),  # magnitude: every step
        "gpt2_adamwspam_magnitude_50": (0.1, True, 1, 201),
        "gpt2_adamwprune_bitter7_state_50": (0.0, False, 50, 201),  # AdamWPrune: every 50
    }
    for r in runs.values():
        assert (r.PRUNING_RAMP_END, r.PRUNING_SCHEDULE, r.PRUNING_HEAD) == (
            3001,
            "cubic_late",
            True,
        )
    assert "MATRIX_OPTIMIZER_SETTINGS" in "\n".join(notes)


def test_the_per_run_comparison_agrees_and_shows_a_changed_run(write_config, tmp_path):
    base, planned, _ = planned_runs(write_config, tmp_path)
    ours = our_matrix(base, planned)
    # knlp's side of three runs, from lib/knlpcheck/optim.py and prune.py
    spam, prune = "run adamwspam magnitude 0.5", "run adamwprune/bitter7 state 0.9"
    for key, value in knlp_optimizer("adamwspam").items():
        assert ours[f"{spam}: {key}"] == value, key
    for key, value in knlp_magnitude(0.5, 200, 4000).items():
        assert ours[f"{spam}: {key}"] == value, key
    for key, value in knlp_optimizer("adamwprune").items():
        assert ours[f"{prune}: {key}"] == value, key
    assert ours[f"{prune}: prune steps"] == knlp_state_steps(0.9, 200, 4000)
    # one run's own value changed: only that run's key differs
    _, changed = expand(
        ["SET=MATRIX_OPTIMIZER_SETTINGS=adamwspam:ADAM_AMSGRAD=n"],
        tmp_path / "matrix.config",
    )
    other = our_matrix(base, changed)
    differ = {k for k in ours if ours[k] != other.get(k)}
    assert {f"run adamwspam magnitude {s}: amsgrad" for s in ("0.5", "0.9")} <= differ
    assert not any(k.startswith("run adamw ") for k in differ)  # AdamW had no own values
    # AdamWPrune's own values were replaced too: it runs on the shared ones; its
    # schedule is state pruning's own (MATRIX_PRUNING_SETTINGS), so that stays
    assert f"{prune}: weight decay" in differ
    assert other[f"{prune}: prune steps"] == ours[f"{prune}: prune steps"]


def knlp_magnitude_updates(target: float, warmup: int, iters: int) -> list[tuple[int, float]]:
    """knlp's magnitude pruning on GPT-2, transcribed for this test from knlp's
    lib/magnitude_pruning.py at 041ec5f2 as its GPT-2 trainer calls it: update_masks(i)
    after the optimizer step of every 0-based iteration i (step i + 1 here), with
    get_current_sparsity: 0 while i < warmup, the target from i >= 3000, else
    target * ((i - warmup) / (3000 - warmup))^3; a sparsity of 0 leaves the masks."""
    out = []
    for i in range(iters):
        if i < warmup:
            s = 0.0
        elif i >= 3000:
            s = target
        else:
            s = target * ((i - warmup) / (3000 - warmup)) ** 3
        if s != 0.0:
            out.append((i + 1, s))
    return out


@pytest.mark.parametrize(("target", "warmup", "iters"), [(0.5, 100, 10000), (0.9, 1000, 3500)])
def test_knlps_magnitude_pruning_updates_on_its_own_schedule(write_config, target, warmup, iters):
    lines = [
        *HEAD[:4],
        "CONFIG_OPTIMIZER_SELECT_ADAMW=y",
        "CONFIG_PRUNING_MODE_SINGLE=y",
        "CONFIG_PRUNING_SELECT_MAGNITUDE=y",
        f'CONFIG_TARGET_SPARSITY="{target}"',
        f"CONFIG_PRUNING_WARMUP={warmup}",
        f"CONFIG_GPT2_MAX_ITERS={iters}",
        'CONFIG_DEVICE="cpu"',
    ]
    run = RunConfig.from_values(typed_values(load_valid(write_config(*lines), [])))
    assert (run.PRUNING_METHOD, run.PRUNING_TARGET_SPARSITY) == ("magnitude", target)
    assert (run.PRUNING_SCOPE, run.PRUNING_HEAD) == ("global", True)
    pruner = magnitude_pruner(run)
    ours = [(s, pruner.target_at(s)) for s in range(1, iters + 1) if pruner.is_update_step(s)]
    theirs = knlp_magnitude_updates(target, warmup, iters)
    # every step of the ramp, at the same sparsity, to its end (step 3001 here) ...
    assert len(ours) == 3000 - warmup and ours[0][0] == warmup + 2
    assert [step for step, _ in ours] == [step for step, _ in theirs[: len(ours)]]
    assert [s for _, s in ours] == pytest.approx([s for _, s in theirs[: len(ours)]], rel=1e-12)
    assert ours[-1] == (3001, target)
    # ... then knlp re-chooses at the target from weights its masks zeroed: unchanged
    assert {s for _, s in theirs[len(ours) :]} == {target}


def test_knlp_matrix_features_still_refused_name_themselves(write_config):
    short = [line for line in GRID if "MAX_ITERS" not in line]
    with pytest.raises(ConfigError) as info:
        load_valid(write_config(*short, "CONFIG_GPT2_MAX_ITERS=2000"), [])
    assert any("magnitude pruning ramp to step 3000" in p for p in info.value.problems)


@pytest.fixture
def knlp_matrix_checkout(tmp_path):
    """A stand-in knlp checkout with GRID's file."""
    return stand_in_checkout(tmp_path / "knlp", {"grid": "\n".join(GRID) + "\n"})


def test_check_compares_a_knlp_matrix_run_by_run(knlp_matrix_checkout, monkeypatch):
    from lib.config.knlp import code, translate_optim
    from lib.knlpcheck import check

    assert check.check_file(
        knlp_matrix_checkout, knlp_matrix_checkout / "gpt2/defconfigs/grid"
    ) == (
        "loaded",
        "",
    )
    # magnitude pruning at MagnitudePruning's own frequency (100) would show ...
    monkeypatch.setattr(translate_optim, "KNLP_MAGNITUDE_FREQUENCY", 100)
    status, detail = check.check_file(
        knlp_matrix_checkout, knlp_matrix_checkout / "gpt2/defconfigs/grid"
    )
    assert status == "mismatch"
    assert "run adamw magnitude 0.5: prune steps: knlp 2800, here 28" in detail
    # ... as would AdamWSPAM sharing AdamW's AMSGrad (no per-optimizer setting)
    monkeypatch.undo()
    monkeypatch.setattr(translate_optim.OptimizerRules, "own_settings", lambda self: None)
    status, detail = check.check_file(
        knlp_matrix_checkout, knlp_matrix_checkout / "gpt2/defconfigs/grid"
    )
    assert status == "mismatch"
    assert "run adamwspam magnitude 0.5: amsgrad: knlp True, here False" in detail
    assert "run adamwprune/bitter7 state 0.9: weight decay: knlp 0.0, here 0.1" in detail
    assert code.KNLP_MAGNITUDE_FREQUENCY == 1
