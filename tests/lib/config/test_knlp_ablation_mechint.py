"""knlp's vanilla ablation steps and its KV feature-circuit analysis, loaded as
the runs knlp makes of them (knlp-format files written here, names as facts)."""

from __future__ import annotations

import pytest

from lib.config.kconfig import ConfigError
from tests.lib.config.knlp_files import HEAD, loaded, stand_in_checkout

CPU = 'CONFIG_DEVICE="cpu"'
STEPS = ["CONFIG_GPT2_VANILLA_ABLATION_MODE=y", 'CONFIG_GPT2_VANILLA_ABLATION_STEPS="V0,V1,V2"']
MECHINT = [
    "CONFIG_KNLP_MECHINT=y",
    "CONFIG_KNLP_MECHINT_KV_POSTTRAIN=y",
    'CONFIG_KNLP_MECHINT_KV_CHECKPOINT="./output/final_model_step*.pt"',
    'CONFIG_KNLP_MECHINT_KV_TARGET_SPARSITY="0.9"',
    "CONFIG_KNLP_MECHINT_KV_STEPS=300",
    'CONFIG_KNLP_MECHINT_KV_LR="0.02"',
    'CONFIG_KNLP_MECHINT_KV_TEMP_SCHEDULE="exp:1.0:0.01"',
    'CONFIG_KNLP_MECHINT_KV_L1_LAMBDA="0.001"',
    "# CONFIG_KNLP_MECHINT_SAVE_MASKS is not set",
]


def test_each_vanilla_step_is_one_run_of_the_same_model_from_its_own_seed(write_config):
    run, notes = loaded(write_config, CPU, *STEPS)
    assert run.MATRIX_SEEDS == "0 1 2" and run.GPT2_ATTENTION == "vanilla"
    one, notes = loaded(write_config, CPU, STEPS[0], 'CONFIG_GPT2_VANILLA_ABLATION_STEPS="V0"')
    assert one.MATRIX_SEEDS == ""  # one step: the plain run, `make` trains it
    assert any("one vanilla ablation step (V0)" in n for n in notes)
    named, _ = loaded(write_config, CPU, STEPS[0], 'CONFIG_GPT2_VANILLA_ABLATION_STEPS="a,b"')
    assert named.MATRIX_SEEDS == "1 2"  # steps without numbers: counted


def test_a_baseline_run_id_replaces_the_baseline_step(write_config):
    run, notes = loaded(
        write_config,
        CPU,
        "CONFIG_ENABLE_WANDB=y",
        'CONFIG_BASELINE_RUN_ID="team/proj/abc123"',
        STEPS[0],
        'CONFIG_GPT2_VANILLA_ABLATION_STEPS="V0,V1,V3"',
    )
    assert run.MATRIX_SEEDS == "1 3" and run.RESULTS_BASELINE_RUN_ID == "team/proj/abc123"
    assert any("V0" in n and "not trained" in n for n in notes)


def test_knlps_analysis_settings_become_mechint_kv(write_config):
    run, notes = loaded(write_config, CPU, *MECHINT)
    assert run.MECHINT_KV and run.MECHINT_KV_SPARSITY == "0.9" and run.MECHINT_KV_STEPS == 300
    assert (run.MECHINT_KV_LR, run.MECHINT_KV_TEMP_SCHEDULE) == ("0.02", "exp:1.0:0.01")
    assert not run.MECHINT_KV_SAVE_MASKS
    assert any("KNLP_MECHINT_KV_L1_LAMBDA" in n and "not symbols of knlp" in n for n in notes)
    assert any("KNLP_MECHINT_KV_CHECKPOINT" in n and "never loaded" in n for n in notes)
    defaults, _ = loaded(write_config, CPU, "CONFIG_KNLP_MECHINT=y")
    assert (defaults.MECHINT_KV_SPARSITY, defaults.MECHINT_KV_STEPS) == ("0.95", 500)


def test_re_plotting_an_earlier_analysis_is_refused_as_a_feature(write_config):
    with pytest.raises(ConfigError) as info:
        loaded(write_config, CPU, "CONFIG_KNLP_MECHINT=y", "CONFIG_KNLP_MECHINT_KV_FROM_RUNS=y")
    [problem] = info.value.problems
    assert "KNLP_MECHINT_KV_FROM_RUNS" in problem and "does not have" in problem


@pytest.fixture
def checkout(tmp_path):
    """A stand-in knlp checkout with the ablation file."""
    text = "\n".join([*HEAD, CPU, *STEPS, *MECHINT]) + "\n"
    return stand_in_checkout(tmp_path / "knlp", {"ablation": text})


def test_check_compares_the_runs_and_the_analysis(checkout, monkeypatch):
    from lib.config.knlp import names, translate
    from lib.knlpcheck import check

    assert "1 GPT-2 defconfigs: 1 loaded, 0 refused, 0 mismatch" in check.report(checkout)
    # one run where knlp trains three ...
    monkeypatch.setattr(translate._Translation, "vanilla_steps", lambda self: None)
    assert "runs per configuration: knlp 3, here 1" in check.report(checkout)
    monkeypatch.undo()
    # ... or an analysis setting left at this project's default shows
    monkeypatch.setitem(names.ROWS, "KNLP_MECHINT_KV_STEPS", names.runtime("dropped for the test"))
    out = check.report(checkout)
    assert "kv circuit: knlp {'sparsity': 0.9, 'steps': 300," in out
    assert "here {'sparsity': 0.9, 'steps': 500," in out
