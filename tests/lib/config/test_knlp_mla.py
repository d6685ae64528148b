"""knlp's MLA family (ENABLE_MLA with MLA_VARIANT) loads as gpt2/kvsplice.py's
variants, one run per MLA_VARIANT entry, with the values knlp's code fixes
(lib/config/knlp/translate_mla.py), and scripts/check_knlp.sh compares them
(lib/knlpcheck/mla.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lib.config.kconfig import ConfigError
from lib.config.run_config import RunConfig, load_valid, typed_values
from tests.lib.config.knlp_files import loaded, stand_in_checkout

ASSET = Path(__file__).resolve().parents[2] / "assets/knlp/gpt2-mla-three-way"
MLA = ["CONFIG_ENABLE_MLA=y"]


def _run(path: Path) -> tuple[RunConfig, list[str]]:
    notes: list[str] = []
    return RunConfig.from_values(typed_values(load_valid(path, notes, knlp=True))), notes


def test_a_variant_list_is_a_matrix_over_those_variants_with_knlps_fixed_values() -> None:
    run, notes = _run(ASSET)
    enabled = {
        v: getattr(run, "GPT2_ATTENTION_ENABLE_" + v.upper())
        for v in ("vanilla", "knlp_mla", "knlp_mla_kv", "knlp_mla_kv_fim")
    }
    assert run.GPT2_ATTENTION_MULTIPLE and run.GPT2_ATTENTION is None
    assert enabled == {
        "vanilla": False,
        "knlp_mla": True,
        "knlp_mla_kv": True,
        "knlp_mla_kv_fim": True,
    }
    assert (run.GPT2_KNLP_MLA_LATENT, run.GPT2_KVSPLICE_RATIO, run.GPT2_KVSPLICE_LAYERS) == (
        128,
        0.25,
        4,  # not 2: knlp's .config drops MLA_KV_FIM_LAYERS
    )
    # knlp's MLA models: GPT-2's 50257 tokens, biases and a tied head, whatever the file says
    assert (run.GPT2_PAD_VOCAB, run.GPT2_BIAS, run.GPT2_TIE_HEAD) == (False, True, True)
    text = "\n".join(notes)
    assert "MLA_KV_FIM_LAYERS=2 (line 23" in text
    assert "MLPSPLICE_RATIO" in text and "GPT2_BIAS=n (line 12)" in text
    assert "`make test-matrix` here" in text


def test_the_matrix_plans_one_run_per_variant(tmp_path) -> None:
    from lib.config.run_config import config_text
    from lib.matrix.grid import expand

    path = tmp_path / ".config"
    path.write_text(config_text(load_valid(ASSET, [], knlp=True)))
    planned = expand([], path)[1]
    assert sorted(p.config.GPT2_ATTENTION for p in planned) == [
        "knlp_mla",
        "knlp_mla_kv",
        "knlp_mla_kv_fim",
    ]


@pytest.mark.parametrize(
    ("entry", "variant"),
    [
        ("mla", "knlp_mla"),
        ("mla_kv", "knlp_mla_kv"),
        ("mla_kv_fim", "knlp_mla_kv_fim"),
        ("mla_kv2m", "knlp_mla_kv"),  # knlp's create_model matches "mla_kv" in it
    ],
)
def test_one_entry_selects_that_variant(write_config, entry, variant) -> None:
    run, notes = loaded(write_config, *MLA, f'CONFIG_MLA_VARIANT="{entry}"')
    assert run.GPT2_ATTENTION == variant and not run.GPT2_ATTENTION_MULTIPLE
    assert run.GPT2_KNLP_MLA_LATENT == 256  # knlp's default
    assert run.GPT2_KVSPLICE_RATIO == (None if variant == "knlp_mla" else 0.5)
    assert (f"{entry} -> {variant}" in "\n".join(notes)) == (entry == "mla_kv2m")


def test_mla_wins_over_rgsa_and_the_gated_forms_as_in_knlps_trainer(write_config) -> None:
    run, _ = loaded(
        write_config, *MLA, "CONFIG_ENABLE_RGSA=y", "CONFIG_GPT2_KNLP=y", "CONFIG_GPT2_KNLP_RA=y"
    )
    assert run.GPT2_ATTENTION == "knlp_mla" and run.GPT2_RGSA_TOP_B is None
    # an empty list: knlp's trainer skips MLA and builds the next one
    run, _ = loaded(write_config, *MLA, 'CONFIG_MLA_VARIANT=""', "CONFIG_ENABLE_RGSA=y")
    assert run.GPT2_ATTENTION == "rgsa"


def test_knlps_asymmetric_split_kv_is_refused_by_name(write_config) -> None:
    with pytest.raises(ConfigError) as err:
        loaded(write_config, *MLA, 'CONFIG_MLA_VARIANT="mla,ksplice_asym"')
    assert "knlp's asymmetric split-KV MLA (MLA_VARIANT ksplice_asym)" in str(err.value)


def test_a_model_name_no_knlp_selection_derives_is_refused_with_what_knlp_ran(
    write_config,
) -> None:
    with pytest.raises(ConfigError) as err:
        loaded(write_config, 'CONFIG_GPT2_MODEL_NAME="gpt2-tiny"')
    text = str(err.value)
    assert 'knlp derives GPT2_MODEL_NAME="gpt2" from it' in text
    assert 'knlp dropped this line and trained what "gpt2" names' in text
    with pytest.raises(ConfigError) as err:  # a value some other selection derives
        loaded(write_config, 'CONFIG_GPT2_MODEL_NAME="gpt2-medium"')
    assert "dropped this line" not in str(err.value)


def test_check_compares_the_mla_settings(tmp_path, monkeypatch) -> None:
    from lib.config.knlp import names
    from lib.knlpcheck import check

    root = stand_in_checkout(tmp_path / "knlp", {"mla": ASSET.read_text()})
    assert "1 GPT-2 defconfigs: 1 loaded, 0 refused, 0 mismatch" in check.report(root)
    # a translation that dropped the latent width shows
    monkeypatch.setitem(names.ROWS, "MLA_D_LATENT", names.runtime("dropped for the test"))
    out = check.report(root)
    assert "1 mismatch" in out and "mla latent: knlp 128, here 256" in out


def test_our_own_name_in_a_knlp_file_is_refused_naming_knlps(write_config) -> None:
    with pytest.raises(ConfigError) as err:
        loaded(write_config, "CONFIG_TRACKER_WANDB=y")
    text = str(err.value)
    assert "CONFIG_TRACKER_WANDB=y is this project's name, not knlp's" in text
    assert "knlp's is CONFIG_ENABLE_WANDB" in text and "did you mean" not in text


def test_saved_defconfig_keeps_the_mla_matrix_in_our_names(tmp_path) -> None:
    from lib.config.kconfig import load_checked

    kconf = load_valid(ASSET, [], knlp=True)
    saved = tmp_path / "defconfig"
    kconf.write_min_config(str(saved))
    text = saved.read_text()
    assert "CONFIG_GPT2_ATTENTION_ENABLE_KNLP_MLA_KV_FIM=y" in text
    assert "CONFIG_MLA_" not in text and "CONFIG_ENABLE_MLA" not in text
    again, problems = load_checked(saved)
    assert problems == [] and typed_values(again) == typed_values(kconf)
