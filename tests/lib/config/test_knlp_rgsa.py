"""knlp's RGSA files (ENABLE_RGSA and its RGSA_* settings) load as GPT2_ATTENTION_RGSA
with every setting carried (lib/config/knlp/names.py RGSA_ROWS), and
scripts/check_knlp.sh compares those settings (lib/knlpcheck/rgsa.py)."""

from __future__ import annotations

from pathlib import Path

from lib.config.run_config import RunConfig, load_valid, typed_values
from tests.lib.config.knlp_files import loaded, stand_in_checkout

ASSET = Path(__file__).resolve().parents[2] / "assets/knlp/gpt2-rgsa-piecewise-random"


def test_a_knlp_rgsa_file_loads_with_every_setting_under_our_names() -> None:
    notes: list[str] = []
    run = RunConfig.from_values(typed_values(load_valid(ASSET, notes, knlp=True)))
    got = {
        name: getattr(run, name)
        for name in (
            "GPT2_ATTENTION",
            "GPT2_RGSA_ROUTING_DIM",
            "GPT2_RGSA_TOP_B",
            "GPT2_RGSA_LOCAL_WINDOW",
            "GPT2_RGSA_ROUTE_STRIDE",
            "GPT2_RGSA_CACHE_ROUTING_LAYERS",
            "GPT2_RGSA_ROUTING",
            "GPT2_RGSA_DYNAMIC_CHUNKING",
            "GPT2_RGSA_CHUNK_SIZE_MIN",
            "GPT2_RGSA_CHUNK_SIZE_MAX",
            "GPT2_RGSA_CHUNK_SCHEDULE",
            "GPT2_RGSA_CHUNK_PIECEWISE",
            "GPT2_RGSA_CHUNK_ROUNDING",
            "GPT2_RGSA_CHUNK_SIZE",
            "GPT2_RGSA_CHUNK_SIZE_ALPHA",
            "GPT2_BLOCK_SIZE",
        )
    }
    assert got == {
        "GPT2_ATTENTION": "rgsa",
        "GPT2_RGSA_ROUTING_DIM": 48,
        "GPT2_RGSA_TOP_B": 6,
        "GPT2_RGSA_LOCAL_WINDOW": 192,
        "GPT2_RGSA_ROUTE_STRIDE": 16,
        "GPT2_RGSA_CACHE_ROUTING_LAYERS": 3,
        "GPT2_RGSA_ROUTING": "random",
        "GPT2_RGSA_DYNAMIC_CHUNKING": True,
        "GPT2_RGSA_CHUNK_SIZE_MIN": 16,
        "GPT2_RGSA_CHUNK_SIZE_MAX": 96,
        "GPT2_RGSA_CHUNK_SCHEDULE": "piecewise",
        "GPT2_RGSA_CHUNK_PIECEWISE": "256:24,1024:40",
        "GPT2_RGSA_CHUNK_ROUNDING": "multiple_of_8",
        "GPT2_RGSA_CHUNK_SIZE": 64,  # knlp's defaults, for what the file leaves out
        "GPT2_RGSA_CHUNK_SIZE_ALPHA": 0.5,
        "GPT2_BLOCK_SIZE": 512,
    }
    text = "\n".join(notes)
    # knlp applies no routing loss and drops symbols its Kconfig lacks: said, not run
    assert "RGSA_ROUTING_LOSS_WEIGHT: knlp never adds a routing loss" in text
    assert "RGSA_ROUTER_FREEZE_STEPS=200 (line 28" in text
    assert "RGSA_CHUNK_SIZE=64 (as GPT2_RGSA_CHUNK_SIZE)" in text


def test_saved_defconfig_keeps_the_rgsa_settings_in_our_names(tmp_path) -> None:
    from lib.config.kconfig import load_checked

    kconf = load_valid(ASSET, [], knlp=True)
    saved = tmp_path / "defconfig"
    kconf.write_min_config(str(saved))
    text = saved.read_text()
    assert "CONFIG_GPT2_RGSA_ROUTE_STRIDE=16" in text and "CONFIG_RGSA_" not in text
    again, problems = load_checked(saved)
    assert problems == [] and typed_values(again) == typed_values(kconf)


def test_dense_mode_wins_over_random_routing_and_rgsa_over_the_gated_choices(
    write_config,
) -> None:
    run, _ = loaded(
        write_config,
        "CONFIG_ENABLE_RGSA=y",
        "CONFIG_RGSA_DENSE_MODE=y",
        "CONFIG_RGSA_RANDOM_ROUTING=y",
        "CONFIG_GPT2_KNLP=y",
        "CONFIG_GPT2_KNLP_SDPA_GATE=y",
    )
    # knlp's trainer builds GPT2_RGSA before it reads GPT2_KNLP; dense mode skips routing
    assert (run.GPT2_ATTENTION, run.GPT2_RGSA_ROUTING) == ("rgsa", "dense")
    run, _ = loaded(write_config, "CONFIG_ENABLE_RGSA=y")
    assert (run.GPT2_RGSA_ROUTING, run.GPT2_RGSA_TOP_B, run.GPT2_RGSA_DYNAMIC_CHUNKING) == (
        "learned",
        8,
        False,
    )


def test_rgsa_settings_while_rgsa_is_off_are_ignored_as_knlp_ignores_them(write_config) -> None:
    run, notes = loaded(write_config, "# CONFIG_ENABLE_RGSA is not set", "CONFIG_RGSA_TOP_B=4")
    assert run.GPT2_ATTENTION == "vanilla" and run.GPT2_RGSA_TOP_B is None
    assert any("RGSA_TOP_B=4" in n and "dependencies are unmet" in n for n in notes)


def test_check_compares_every_rgsa_setting(tmp_path, monkeypatch) -> None:
    from lib.config.knlp import names
    from lib.knlpcheck import check

    root = stand_in_checkout(tmp_path / "knlp", {"rgsa": ASSET.read_text()})
    assert "1 GPT-2 defconfigs: 1 loaded, 0 refused, 0 mismatch" in check.report(root)
    # a translation that dropped a setting, or read the rounding wrongly, shows
    monkeypatch.setitem(names.ROWS, "RGSA_TOP_B", names.runtime("dropped for the test"))
    monkeypatch.setitem(
        names.ROWS,
        "RGSA_CHUNK_SIZE_ROUNDING",
        names.values(multiple_of_8="GPT2_RGSA_CHUNK_ROUNDING_POW2"),
    )
    out = check.report(root)
    assert "1 mismatch" in out and "rgsa top b: knlp 6, here 8" in out
    # 512 tokens: piecewise 40, a multiple of 8 (knlp) against the power of 2 32
    assert "rgsa chunk at block: knlp 40, here 32" in out
