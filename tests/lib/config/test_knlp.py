"""knlp-format files load as the experiments they are in knlp (lib/config/knlp/).

The files here are written for these tests in knlp's format (its symbol names
are facts); the expected defaults are knlp's, from lib/config/knlp/table.py.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from lib.config.kconfig import ConfigError, closest_name, load_checked
from lib.config.knlp.translate import is_knlp
from lib.config.run_config import load_valid, typed_values
from tests.lib.config.knlp_files import HEAD, PRUNE_HEAD, SPAM_HEAD, knlp_default, loaded


def test_what_a_knlp_file_leaves_unset_takes_knlp_defaults(write_config):
    run, notes = loaded(write_config, 'CONFIG_DEVICE="cpu"')
    assert run.GPT2_MAX_ITERS == int(knlp_default("GPT2_MAX_ITERS")) == 10000
    assert run.GPT2_BLOCK_SIZE == int(knlp_default("GPT2_BLOCK_SIZE")) == 1024
    assert run.LEARNING_RATE == float(knlp_default("LEARNING_RATE"))
    assert run.GPT2_WARMUP_STEPS == int(knlp_default("GPT2_WARMUP_STEPS"))
    assert run.TRAIN_EVAL_ITERS == int(knlp_default("GPT2_EVAL_SAMPLES"))
    assert run.GPT2_DROPOUT == float(knlp_default("GPT2_DROPOUT"))
    # what knlp's AdamW runs (torch's defaults, gpt2/train.py's decay 0.1), not its ADAMW_*
    assert (run.ADAM_BETA2, run.WEIGHT_DECAY, run.ADAM_AMSGRAD) == (0.999, 0.1, False)
    # knlp's AUTO batch mode (its choice default): 256 sequences per GPU
    assert (run.HYPER_PARAM, run.TARGET_EFFECTIVE_BATCH) == ("auto", 256)
    # DEVICE="cpu" hides knlp's mixed precision and compile choice: both off
    assert (run.DEVICE, run.MIXED_PRECISION, run.COMPILE_MODEL) == ("cpu", False, False)
    assert any(n.startswith("knlp defaults applied") and "GPT2_MAX_ITERS=10000" in n for n in notes)


def test_knlp_names_are_translated_and_every_value_kept(write_config):
    run, notes = loaded(
        write_config,
        'CONFIG_DEVICE="cuda"',
        "CONFIG_HYPER_PARAM_MANUAL=y",
        "CONFIG_BATCH_SIZE=16",
        "CONFIG_GPT2_GRADIENT_ACCUMULATION=4",
        "CONFIG_GPT2_DECAY_LR=n",
        "CONFIG_GPT2_MAX_TIME=60",
        "CONFIG_GPT2_LOG_INTERVAL=5",
        "CONFIG_GPT2_EVAL_SAMPLES=7",
        'CONFIG_GPT2_AMP_DTYPE="float16"',
        "CONFIG_COMPILE_MANUAL=y",
        "# CONFIG_COMPILE_MODEL is not set",
        "CONFIG_GPT2_WEIGHT_TYING=n",
        "CONFIG_GPT2_FLASH_ATTENTION=n",
        "CONFIG_GPT2_MAX_ITERS=500",
    )
    assert (run.HYPER_PARAM, run.BATCH_SIZE, run.GPT2_GRADIENT_ACCUMULATION) == ("manual", 16, 4)
    assert (run.LR_SCHEDULE, run.TRAIN_MAX_TIME, run.TRAIN_LOG_INTERVAL) == ("constant", 60, 5)
    assert (run.TRAIN_EVAL_ITERS, run.MIXED_PRECISION_DTYPE, run.COMPILE_MODEL) == (
        7,
        "fp16",
        False,
    )
    # knlp never reads GPT2_FLASH_ATTENTION (its own test below): SDPA keeps its choice.
    assert (run.GPT2_TIE_HEAD, run.SDPA_BACKEND, run.GPT2_MAX_ITERS) == (False, "auto", 500)
    assert "knlp format" in notes[0] and "names translated" in notes[0]


def test_compile_auto_compiles_on_a_gpu_in_auto_mode(write_config):
    run, _ = loaded(write_config, 'CONFIG_DEVICE="cuda"', "CONFIG_COMPILE_AUTO=y")
    assert run.COMPILE_MODEL is True


def test_a_derived_string_that_agrees_loads_and_one_that_contradicts_is_refused(write_config):
    run, _ = loaded(
        write_config,
        'CONFIG_OPTIMIZER="adamw"',
        'CONFIG_MODEL="gpt2"',
        'CONFIG_GPT2_MODEL_NAME="gpt2"',
        'CONFIG_PRUNING_METHOD="none"',
    )
    assert run.OPTIMIZER == "adamw"
    with pytest.raises(ConfigError) as info:
        loaded(write_config, 'CONFIG_OPTIMIZER="adamwspam"')
    [problem] = info.value.problems
    assert "test.config:7" in problem and 'knlp derives OPTIMIZER="adamw"' in problem


@pytest.fixture
def rgsa_lacking(monkeypatch):
    """RGSA as a feature this project lacks (as it did before gpt2/rgsa.py): its gate
    a `feature` row, its settings unknown to the table. Keeps these tests about the
    mechanism whichever knlp features land here."""
    from lib.config.knlp import names, translate

    gate = names.feature("RGSA, retrieval-gated sparse attention (ENABLE_RGSA)")
    monkeypatch.setitem(names.ROWS, "ENABLE_RGSA", gate)
    for name in names.RGSA_ROWS:
        if name != "ENABLE_RGSA":
            monkeypatch.delitem(names.ROWS, name, raising=False)
    kept = {n: v for n, v in translate.SYMBOLS.items() if not n.startswith("RGSA_")}
    monkeypatch.setattr(translate, "SYMBOLS", kept)


def test_a_missing_feature_is_refused_in_one_line_naming_it(write_config, rgsa_lacking):
    with pytest.raises(ConfigError) as info:
        loaded(
            write_config,
            "CONFIG_ENABLE_RGSA=y",
            "CONFIG_RGSA_CHUNK_SIZE=64",
            "CONFIG_RGSA_TOP_B=8",
            "CONFIG_RGSA_DYNAMIC_CHUNKING=y",
        )
    [problem] = info.value.problems
    assert "RGSA" in problem and "does not have" in problem and "RGSA_TOP_B" in problem


def test_a_missing_feature_that_is_off_is_ignored(write_config, rgsa_lacking):
    run, notes = loaded(write_config, "# CONFIG_ENABLE_RGSA is not set", "CONFIG_RGSA_TOP_B=8")
    assert run.GPT2_ATTENTION == "vanilla"
    assert any("RGSA_TOP_B" in n and "features that are off" in n for n in notes)


def test_runtime_knobs_are_accepted_with_a_notice_and_tracker_settings_kept(write_config):
    run, notes = loaded(
        write_config,
        "CONFIG_NUM_WORKERS=16",
        "CONFIG_PREFETCH_FACTOR=4",
        "CONFIG_NUM_EPOCHS=3",
        "CONFIG_SAVE_CHECKPOINT=y",
        "CONFIG_CHECKPOINT_INTERVAL=500",
        "CONFIG_ENABLE_WANDB=y",
        "CONFIG_ENABLE_TRACKIO=y",
        'CONFIG_WANDB_ENTITY="lab"',
        'CONFIG_TRACKER_PROJECT="gpt2-study"',
        'CONFIG_TRACKER_RUN_NAME="base"',
        'CONFIG_BASELINE_RUN_ID="gpt2_adamw_none"',
    )
    text = "\n".join(notes)
    assert "NUM_WORKERS, PREFETCH_FACTOR" in text and "NUM_EPOCHS" in text
    assert (run.SAVE_CHECKPOINT, run.CHECKPOINT_INTERVAL) == (True, 500)  # features here now
    # knlp's tracker and baseline settings are ours now: carried, not noted
    assert (run.TRACKER_WANDB, run.TRACKER_TRACKIO, run.TRACKER_WANDB_ENTITY) == (True, True, "lab")
    assert (run.TRACKER_PROJECT, run.TRACKER_RUN_NAME) == ("gpt2-study", "base")
    assert run.RESULTS_BASELINE_RUN_ID == "gpt2_adamw_none"
    assert "is not in this project yet" not in text


def test_values_knlp_ignores_are_ignored_here_with_a_notice(write_config):
    # BATCH_SIZE depends on HYPER_PARAM_MANUAL in knlp; SEED is no knlp symbol
    run, notes = loaded(write_config, "CONFIG_BATCH_SIZE=8", "CONFIG_SEED=42")
    assert run.HYPER_PARAM == "auto"
    text = "\n".join(notes)
    assert "BATCH_SIZE=8 (line 7)" in text and "SEED=42 (line 8" in text


def test_knlp_gate_and_gated_ra_together_select_the_combined_attention(write_config):
    run, _ = loaded(
        write_config,
        "CONFIG_GPT2_KNLP=y",
        "CONFIG_GPT2_KNLP_SDPA_GATE=y",
        "CONFIG_GPT2_KNLP_RA=y",
        "CONFIG_GPT2_KNLP_RA_LAYERS=2",
    )
    assert (run.GPT2_ATTENTION, run.GPT2_RA_GATED_LAYERS) == ("sdpa_gate_ra_gated", 2)


def test_an_unknown_name_in_a_knlp_file_gets_a_did_you_mean(write_config):
    with pytest.raises(ConfigError) as info:
        loaded(write_config, "CONFIG_LERNING_RATE=0.01")
    [problem] = info.value.problems
    assert "test.config:7" in problem and "did you mean CONFIG_LEARNING_RATE" in problem


def test_saved_defconfig_is_in_this_projects_names_and_reloads_the_same(tmp_path, write_config):
    kconf = load_valid(write_config(*HEAD, 'CONFIG_DEVICE="cpu"', "CONFIG_GPT2_DECAY_LR=n"))
    saved = tmp_path / "defconfig"
    kconf.write_min_config(str(saved))
    text = saved.read_text()
    assert not is_knlp(text) and "DECAY_LR" not in text and "SELECT" not in text
    again, problems = load_checked(saved)
    assert problems == [] and typed_values(again) == typed_values(kconf)


def test_our_own_files_are_not_taken_for_knlp(write_config):
    assert not is_knlp(
        Path(write_config("CONFIG_MODEL_GPT2=y", "CONFIG_GPT2_MAX_ITERS=5")).read_text()
    )


def test_did_you_mean_points_to_the_symbol_that_holds_the_setting():
    names = [
        "OPTIMIZER_ADAMW",
        "OPTIMIZER_ENABLE_ADAMW",
        "EVAL_SAMPLES",
        "TRAIN_EVAL_ITERS",
        "LR_SCHEDULE_COSINE",
        "TRAIN_LOG_INTERVAL",
    ]
    assert closest_name("OPTIMIZER_SELECT_ADAMW", names) == "OPTIMIZER_ADAMW"
    assert closest_name("OPTIMIZER_SELEC_ADAMW", names) == "OPTIMIZER_ADAMW"
    assert closest_name("GPT2_EVAL_SAMPLES", names) == "TRAIN_EVAL_ITERS"
    assert closest_name("GPT2_DECAY_LR", names) == "LR_SCHEDULE_COSINE"


@pytest.mark.skipif(not os.environ.get("KNLP_CHECKOUT"), reason="set KNLP_CHECKOUT=<knlp clone>")
def test_committed_table_matches_the_knlp_checkout():
    from lib.config.knlp.source import render_table

    table = Path(__file__).resolve().parents[3] / "lib/config/knlp/table.py"
    assert render_table(Path(os.environ["KNLP_CHECKOUT"])) == table.read_text()


@pytest.fixture
def knlp_checkout(tmp_path):
    """A stand-in knlp checkout: our table's tree as its Kconfig, two GPT-2 defconfigs."""
    import subprocess

    from lib.config.knlp.tree import render

    root = tmp_path / "knlp"
    (root / "gpt2/defconfigs").mkdir(parents=True)
    (root / "Kconfig").write_text(render())
    (root / "gpt2/defconfigs/plain").write_text("\n".join(HEAD + ['CONFIG_DEVICE="cpu"']) + "\n")
    several = ["CONFIG_MODEL_MODE_MULTIPLE=y", *HEAD[2:]]  # knlp's several model families
    (root / "gpt2/defconfigs/several-families").write_text("\n".join(several) + "\n")
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run(git + ["add", "."], check=True)
    subprocess.run(git + ["commit", "-qm", "x"], check=True)
    return root


def test_check_script_counts_loaded_and_refused_files(knlp_checkout):
    import subprocess

    root = Path(__file__).resolve().parents[3]
    out = subprocess.run(
        [str(root / "scripts/check_knlp.sh"), str(knlp_checkout)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "2 GPT-2 defconfigs: 1 loaded, 1 refused, 0 mismatch" in out
    assert "MODEL_MODE_MULTIPLE" in out.splitlines()[1] and "loaded" in out.splitlines()[0]


def test_check_compares_knlps_adamwspam_schedule_in_steps(knlp_checkout, monkeypatch):
    from lib.config.knlp import translate
    from lib.knlpcheck import check

    spam = knlp_checkout / "gpt2/defconfigs/spam"
    spam.write_text("\n".join(SPAM_HEAD + ["CONFIG_SPAM_INTERVAL=400"]) + "\n")
    out = check.report(knlp_checkout)
    assert "3 GPT-2 defconfigs: 2 loaded, 1 refused, 0 mismatch" in out
    # a translation that kept knlp's count would run resets half as often
    monkeypatch.setattr(translate._Translation, "spam_schedule", lambda self: None)
    out = check.report(knlp_checkout)
    assert "spam interval: knlp 200, here 500" in out


def test_check_compares_knlps_adamwprune_schedule_step_by_step(knlp_checkout, monkeypatch):
    from lib.config.knlp import translate, translate_optim
    from lib.knlpcheck import check

    (knlp_checkout / "gpt2/defconfigs/prune").write_text("\n".join(PRUNE_HEAD) + "\n")
    out = check.report(knlp_checkout)
    assert "3 GPT-2 defconfigs: 2 loaded, 1 refused, 0 mismatch" in out
    # a translation that took ADAMWPRUNE_FREQUENCY's meaning (every 100 steps) ...
    monkeypatch.setattr(translate_optim, "KNLP_PRUNE_FREQUENCY", 100)
    out = check.report(knlp_checkout)
    assert "1 mismatch" in out and "prune steps: knlp 58, here 29; from #1: knlp ((151, " in out
    # ... or left the tied head unpruned shows too
    monkeypatch.undo()
    real = translate._Translation.assign

    def no_head(self, ours, value, *args):
        real(self, ours, "n" if ours == "PRUNING_HEAD" else value, *args)

    monkeypatch.setattr(translate._Translation, "assign", no_head)
    out = check.report(knlp_checkout)
    assert "pruned weights: knlp 'blocks + head', here 'blocks'" in out


def test_check_reports_a_value_the_translation_drops(knlp_checkout, monkeypatch):
    from lib.config.knlp import names
    from lib.knlpcheck import check

    monkeypatch.setitem(names.ROWS, "GPT2_EVAL_SAMPLES", names.runtime("dropped for the test"))
    out = check.report(knlp_checkout)
    assert "1 mismatch" in out and "eval iters: knlp 200, here 20" in out


def test_a_knlp_gpt2_file_gets_its_exact_gelu(write_config):
    """knlp's GPT-2 MLP is nn.GELU() in its code, whatever its Kconfig: exact,
    where this project's default (OpenAI's weights) is tanh."""
    run, notes = loaded(write_config, 'CONFIG_DEVICE="cpu"')
    assert run.GPT2_GELU == "exact"
    assert any("knlp's GPT-2 MLP (exact GELU)=y (as GPT2_GELU_EXACT)" in n for n in notes)


def test_a_knlp_gpt2_file_gets_its_padded_vocabulary_and_its_sdpa_kernel(write_config):
    """knlp's GPTConfig pads GPT-2's vocabulary to 50304 in code, and its
    trainer never reads GPT2_FLASH_ATTENTION: SDPA picks its kernel there."""
    run, notes = loaded(
        write_config, 'CONFIG_DEVICE="cpu"', "# CONFIG_GPT2_FLASH_ATTENTION is not set"
    )
    assert run.GPT2_PAD_VOCAB and run.SDPA_BACKEND == "auto"
    assert any("padded to 50304" in n for n in notes)
    assert any("GPT2_FLASH_ATTENTION" in n and "never reads it" in n for n in notes)
