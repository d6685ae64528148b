"""`make eval-baseline` on tiny random transformers models of three architectures,
each with a tokenizer saved beside it, against transformers' own loss."""

from __future__ import annotations

import math

import pytest
import torch

from lib.eval.baseline import load_baseline, read_folder
from lib.eval.suite import evaluate_baseline
from lib.run.checkpoint import CheckpointError
from tests.lib.eval.hf_models import build

BLOCK = 32
STRIDE = 12  # < BLOCK: overlapping windows, only the last STRIDE predictions count
TEXT = (
    "The quick brown fox jumps over the lazy dog. Naïve café owners sell crème brûlée;\n"
    "ROMEO: but soft, what light through yonder window breaks?\n"
) * 5


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """{architecture: a save_pretrained folder (safetensors + tokenizer)}."""
    out = {}
    for kind in ("gpt2", "gpt_neox", "llama"):
        model, tok = build(kind, BLOCK, TEXT)
        folder = tmp_path_factory.mktemp("models") / f"tiny-{kind}"
        model.save_pretrained(folder)  # safetensors, transformers' default
        tok.save_pretrained(folder)
        out[kind] = folder
    return out


def brute_force_nll(folder, ids: list[int]) -> float:
    """Summed NLL of ids[1:] by transformers' own loss over every window
    perplexity.py makes: model(x, labels=...) with the targets already shifted
    (shift_labels, so the window's last input predicts the token after it),
    -100 where an earlier window scored. In float64."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float64).eval()
    t, total, scored, begin = torch.tensor(ids), 0.0, 0, 0
    while scored < len(ids) - 1:
        end = min(begin + BLOCK, len(ids) - 1)
        x, y = t[begin:end].unsqueeze(0), t[begin + 1 : end + 1].unsqueeze(0).clone()
        y[0, : scored - begin] = -100  # targets up to index `scored` are done
        with torch.no_grad():
            loss = model(input_ids=x, labels=y, shift_labels=y).loss.item()
        total += loss * (end - scored)
        scored, begin = end, begin + STRIDE
    return total


@pytest.mark.parametrize("kind", ["gpt2", "gpt_neox", "llama"])
def test_baseline_matches_transformers_loss_on_the_same_windows(kind, folders, tiny_run, tmp_path):
    text = tmp_path / "t.txt"
    text.write_text(TEXT)
    cfg = tiny_run(EVAL_TEXT_FILE=str(text), EVAL_STRIDE=STRIDE, EVAL_BATCH_SIZE=3)
    record = evaluate_baseline(folders[kind], cfg, log=lambda _: None)
    out = tmp_path / "results" / f"baseline-tiny-{kind}" / "eval.json"
    assert out.is_file()
    _, tok, info = load_baseline(folders[kind])
    assert info["family"] == kind and record["model"]["params"] == info["params"] > 0
    start = tok.tokenizer.bos_token_id
    ids = [start] + tok.tokenizer(TEXT, add_special_tokens=False)["input_ids"]
    entry = record["sets"]["text"]
    assert entry["tokens"] == len(ids) - 1 and entry["stride"] == STRIDE
    assert entry["nll"] == pytest.approx(brute_force_nll(folders[kind], ids), rel=1e-5)
    n_bytes = len(TEXT.encode("utf-8"))  # the accented letters are 2 bytes each
    assert entry["bytes"] == n_bytes > len(TEXT)
    assert entry["bits_per_byte"] == pytest.approx(entry["nll"] / math.log(2) / n_bytes)
    assert entry["words"] == len(TEXT.split())
    assert entry["word_perplexity"] == pytest.approx(math.exp(entry["nll"] / entry["words"]))
    assert "skipped" in record["sets"]["val"]  # char data: not the baseline's tokens
    measured = record["measured"]
    assert measured["tokens"] == entry["tokens"] and measured["tokens_per_sec"] > 0
    assert measured["peak_memory_mb"] > 0 and measured["machine"]


def test_bits_per_byte_and_word_perplexity_by_hand(folders, tiny_run, tmp_path):
    """Two words, ten bytes ("ab cdéfg\\n": é is two bytes): the figures follow
    from the summed NLL alone, whatever the tokenizer made of the text."""
    text = tmp_path / "t.txt"
    text.write_text("ab cdéfg\n", encoding="utf-8")
    cfg = tiny_run(EVAL_TEXT_FILE=str(text), EVAL_VAL="n")
    entry = evaluate_baseline(folders["llama"], cfg, log=lambda _: None)["sets"]["text"]
    assert (entry["bytes"], entry["words"]) == (10, 2)
    assert entry["bits_per_byte"] == pytest.approx(entry["nll"] / 10 / 0.6931471805599453)
    assert entry["word_perplexity"] == pytest.approx(math.exp(entry["nll"] / 2))
    assert entry["perplexity"] == pytest.approx(math.exp(entry["nll"] / entry["tokens"]))


def test_a_pickled_checkpoint_is_refused_before_anything_is_read(folders, tmp_path):
    folder = tmp_path / "pickled"
    folder.mkdir()
    (folder / "config.json").write_text((folders["gpt2"] / "config.json").read_text())
    canary = tmp_path / "unpickled"

    class Trap:
        def __reduce__(self):
            return (canary.touch, ())

    torch.save({"x": Trap()}, folder / "pytorch_model.bin")
    with pytest.raises(CheckpointError, match="only pytorch_model.bin.*safetensors only"):
        load_baseline(folder)
    assert not canary.exists()


def test_model_code_in_the_folder_needs_trust_remote_code(folders, tmp_path):
    import json

    folder = tmp_path / "custom"
    folder.mkdir()
    config = json.loads((folders["llama"] / "config.json").read_text())
    config["model_type"] = "mobilellm"
    config["auto_map"] = {"AutoModelForCausalLM": "modeling_mobilellm.MobileLLMForCausalLM"}
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "model.safetensors").write_bytes(b"")
    with pytest.raises(CheckpointError, match="CONFIG_EVAL_TRUST_REMOTE_CODE=y"):
        read_folder(folder, trust_remote_code=False)
    assert read_folder(folder, trust_remote_code=True)["model_type"] == "mobilellm"


def test_trust_remote_code_is_off_by_default(tiny_run):
    assert tiny_run().EVAL_TRUST_REMOTE_CODE is False


def test_a_folder_without_its_tokenizer_says_so(folders, tmp_path):
    import shutil

    folder = tmp_path / "no-tokenizer"
    folder.mkdir()
    for name in ("config.json", "model.safetensors"):
        shutil.copy(folders["gpt2"] / name, folder / name)
    with pytest.raises(CheckpointError, match="no tokenizer could be read"):
        load_baseline(folder)


def test_lm_eval_scores_a_baseline_through_the_harness_hf_model(folders, tiny_run, tmp_path):
    """The local rolling task (word perplexity of a JSONL text) through lm-eval's
    HFLM; it needs the accelerate package, which lm-eval does not install."""
    pytest.importorskip("accelerate")
    from lib.eval import downstream
    from lib.run.eval_record import load_eval
    from tests.lib.eval.test_harness import TASKS

    cfg = tiny_run(LM_EVAL_INCLUDE_PATH=str(TASKS), EVAL_BATCH_SIZE=2)
    section = downstream.evaluate_baseline_tasks(
        folders["llama"], cfg, "kconfig_llm_rolling", lambda _: None
    )
    assert section["model"]["family"] == "llama"
    record = load_eval(tmp_path / "results" / "baseline-tiny-llama")
    assert record is not None and "kconfig_llm_rolling" in record["lm_eval"]["tasks"]


def test_lm_eval_without_accelerate_says_what_to_install(folders, tiny_run, monkeypatch):
    import sys

    from lib.eval import downstream

    monkeypatch.setitem(sys.modules, "lm_eval.models.huggingface", None)  # import fails
    with pytest.raises(RuntimeError, match="pip install accelerate"):
        downstream.evaluate_baseline_tasks(folders["gpt2"], tiny_run(), "x", lambda _: None)
