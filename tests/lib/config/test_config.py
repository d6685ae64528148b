"""RunConfig: typed values, overrides validated like the file, derived values."""

from __future__ import annotations

import pytest

from lib.config.kconfig import ConfigError, load_strict
from lib.config.run_config import load_run_config, typed_values, write_outputs


def test_values_are_typed(dot_config):
    run = load_run_config([], dot_config)
    assert run.BATCH_SIZE == 12 and isinstance(run.BATCH_SIZE, int)
    assert run.LEARNING_RATE == pytest.approx(1e-3) and isinstance(run.LEARNING_RATE, float)
    assert run.GPT2_BIAS is True
    assert run.GPT2_DATASET == "shakespeare"
    assert run.DEVICE == "auto" and run.OPTIMIZER == "adamw" and run.GPT2_MODEL == "custom"


def test_a_symbol_its_dependencies_hide_is_none(tmp_path, write_config):
    path = write_config("CONFIG_GPT2_MODEL_124M=y")
    write_outputs(load_strict(path), tmp_path / ".config", tmp_path / "config.py")
    run = load_run_config([], tmp_path / ".config")
    assert run.GPT2_N_LAYER is None and "GPT2_N_LAYER" not in run.values
    assert run.GPT2_MODEL == "124m" and run.GPT2_MODEL_124M is True


def test_overrides_change_the_run_not_the_file(dot_config):
    before = dot_config.read_text()
    run = load_run_config(
        [
            "MAX_ITERS=7",
            "DEVICE=cpu",
            "COMPILE=y",
            "TIME=60",
            "GRAD_ACCUM=3",
            "SET=LEARNING_RATE=3e-4 TRAIN_SEED=5 GPT2_WARMUP_STEPS=2",
        ],
        dot_config,
    )
    assert (run.GPT2_MAX_ITERS, run.DEVICE, run.TRAIN_MAX_TIME) == (7, "cpu", 60)
    assert run.COMPILE_MODEL
    assert run.LEARNING_RATE == pytest.approx(3e-4) and run.TRAIN_SEED == 5
    assert dot_config.read_text() == before
    assert "CONFIG_GPT2_MAX_ITERS=7" in run.config_text
    assert "MAX_ITERS=7" in run.config_text.splitlines()[0]


@pytest.mark.parametrize(
    "arg, expect",
    [
        ("BATCH_SIZE=4096", "allowed: 1 to 2048"),
        ("BATCH_SIZE=abc", "not an integer"),
        ("LR=6e-4x", "is not a number"),
        ("DEVICE=tpu", "auto, cuda, cpu, mps"),
        ("COMPILE=1", "allowed y or n"),
        ("NOT_A_SYMBOL=3", "unknown name"),
        ("SET=LERNING_RATE=1e-3", "LERNING_RATE=1e-3: unknown name (did you mean LEARNING_RATE?)"),
        ("MAX_ITER=20", "unknown name (did you mean MAX_ITERS?)"),
        ("SET=OPTIMISER=muon", "unknown name (did you mean OPTIMIZER?)"),
        ("DRY_RUN=maybe", "allowed 1 or 0"),
        ("SET=GPT2_N_LAYER=2 GPT2_N_EMBD=130", "CONFIG_GPT2_N_EMBD=130 is not divisible"),
    ],
)
def test_bad_overrides_are_rejected_naming_the_value(dot_config, arg, expect):
    with pytest.raises(ConfigError) as info:
        load_run_config([arg], dot_config)
    assert expect in str(info.value)


def test_flags_are_parsed(dot_config):
    run = load_run_config(["DRY_RUN=1", "YES=1"], dot_config)
    assert run.flags == {"DRY_RUN": True, "YES": True, "RESUME": False, "RETRY_FAILED": False}


def test_override_of_symbol_with_unmet_dependency_is_rejected(dot_config):
    with pytest.raises(ConfigError, match="COMPILE_STRICT=y was not applied.*depends on"):
        load_run_config(["SET=COMPILE_STRICT=y"], dot_config)


def test_derived_values_multiply_out(dot_config):
    run = load_run_config(["BATCH_SIZE=8", "GRAD_ACCUM=4", "MAX_ITERS=40"], dot_config)
    d = run.derived(world_size=2)
    assert d["effective_batch_size"] == 8 * 4 * 2
    assert d["tokens_per_iter"] == 64 * run.GPT2_BLOCK_SIZE
    assert d["total_tokens"] == 40 * d["tokens_per_iter"]
    assert "effective batch 64 = batch 8 x accumulation 4 x world 2" in run.describe(2)


def test_config_py_holds_the_same_values(dot_config):
    namespace: dict = {}
    exec(compile((dot_config.parent / "config.py").read_text(), "config.py", "exec"), namespace)
    assert namespace["CONFIG"].values == typed_values(load_strict(dot_config))


def test_missing_dot_config_says_which_defconfig_to_use(tmp_path):
    with pytest.raises(ConfigError, match="make defconfig-gpt2-tiny-shakespeare"):
        load_run_config([], tmp_path / ".config")


def test_a_dot_config_that_is_not_utf8_is_one_error_for_every_command(dot_config):
    # `make`, `make show` and `make continue` all read .config through load_run_config
    dot_config.write_bytes(dot_config.read_bytes() + b"# \xff\n")
    line = dot_config.read_bytes().count(b"\n")
    for args in ([], ["MAX_ITERS=50"]):
        with pytest.raises(ConfigError) as info:
            load_run_config(args, dot_config)
        [problem] = info.value.problems
        assert problem.startswith(f"{dot_config}:{line}: byte 0xff (column 3) is not UTF-8 text")
