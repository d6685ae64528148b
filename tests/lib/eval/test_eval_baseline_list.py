"""`make eval-baselines`: CONFIG_EVAL_BASELINES's list, missing folders skipped
with the command that fetches them."""

from __future__ import annotations

import json

import pytest

from lib.data import DataError
from lib.eval.baseline_list import evaluate_listed, read_list
from lib.paths import ROOT
from tests.lib.eval.hf_models import build


def test_the_shipped_hamt_plan_list_names_every_planned_model():
    listed = {b.name: b for b in read_list("baselines/hamt-plan", "models")}
    assert [b.repo for b in listed.values()] == [
        "distilbert/distilgpt2",
        "openai-community/gpt2",
        "openai-community/gpt2-medium",
        "EleutherAI/pythia-160m",
        "EleutherAI/pythia-410m",
        "TinyLlama/TinyLlama-1.1B-intermediate-step-1431k-3T",
        "facebook/MobileLLM-125M",
        "HuggingFaceTB/SmolLM-135M",
    ]
    assert [n for n, b in listed.items() if b.trust_remote_code] == ["mobilellm-125m"]
    assert listed["gpt2"].folder == ROOT / "models" / "gpt2"


def test_bad_lines_are_named_with_file_and_line(tmp_path):
    path = tmp_path / "list"
    path.write_text("# comment\nok org/ok\nlonely\nok org/again\n")
    with pytest.raises(DataError) as err:
        read_list(str(path), str(tmp_path))
    assert f"{path}:3: 'lonely'" in str(err.value) and "'ok' is listed twice" in str(err.value)


def test_missing_folders_are_skipped_with_how_to_fetch_them(tiny_run, tmp_path):
    model, tok = build("gpt2", 32, "unused")
    model.save_pretrained(tmp_path / "models" / "here")
    tok.save_pretrained(tmp_path / "models" / "here")
    config = json.loads((tmp_path / "models" / "here" / "config.json").read_text())
    custom = tmp_path / "models" / "custom"
    custom.mkdir()
    (custom / "config.json").write_text(json.dumps({**config, "model_type": "mobilellm"}))
    listing = tmp_path / "list"
    listing.write_text(
        "here org/here\nmissing EleutherAI/pythia-160m\ncustom facebook/x trust_remote_code\n"
    )
    text = tmp_path / "t.txt"
    text.write_text("A short text to score, twice. " * 4)
    cfg = tiny_run(
        EVAL_BASELINES=str(listing),
        EVAL_BASELINES_DIR=str(tmp_path / "models"),
        EVAL_TEXT_FILE=str(text),
    )
    lines: list[str] = []
    outcome = evaluate_listed(cfg, lines.append)
    assert outcome["here"] == "evaluated: baseline-here"
    assert (tmp_path / "results" / "baseline-here" / "eval.json").is_file()
    fetch = f"hf download EleutherAI/pythia-160m --local-dir {tmp_path / 'models' / 'missing'}"
    assert outcome["missing"].startswith("skipped") and fetch in outcome["missing"]
    assert "CONFIG_EVAL_BASELINES_DIR" in outcome["missing"]
    assert "CONFIG_EVAL_TRUST_REMOTE_CODE=y" in outcome["custom"]
    assert not (tmp_path / "results" / "baseline-missing").exists()
    assert any(line.startswith("eval-baselines missing: skipped") for line in lines)
