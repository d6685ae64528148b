"""`make eval` on a trained tiny run and on a pretrained Hugging Face GPT-2."""

from __future__ import annotations

import math
import os
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from lib.data import DataError, load_meta, tokenizer_from_meta
from lib.data.prepared import data_dir
from lib.eval.suite import evaluate_baseline, evaluate_run
from lib.model.registry import family
from lib.run.checkpoint import load_checkpoint
from lib.run.eval_record import load_eval
from lib.train.naming import create_run_dir
from lib.train.trainer import Trainer
from tests.lib.eval.hf_models import gpt2_bpe_tokenizer

BLOCK = 32  # tiny_run's GPT2_BLOCK_SIZE


@pytest.fixture
def trained(tiny_run, tmp_path):
    """A run trained for 6 steps, and a held-out text in its character set."""
    run = tiny_run(GPT2_MAX_ITERS=6, GPT2_EVAL_INTERVAL=3, RUN_NAME="ev")
    run_dir = create_run_dir(run)
    Trainer(run, run_dir, log=lambda _: None).train()
    text = tmp_path / "held_out.txt"
    text.write_text((tmp_path / "corpus.txt").read_text()[:700])
    return run, run_dir, text


def checkpoint_model(run_dir):
    state = load_checkpoint(run_dir / "ckpt_best.pt")
    fam = family(state["family"])
    model = fam.build(fam.config_cls(**state["model_config"]))
    model.load_state_dict(state["model"])
    return model.eval(), tokenizer_from_meta(state["tokenizer"])


def disjoint_nll(logits_of, ids: list[int]) -> float:
    """Stride = context: chunks of BLOCK inputs, each predicting its next tokens."""
    t, total = torch.tensor(ids), 0.0
    for begin in range(0, len(ids) - 1, BLOCK):
        end = min(begin + BLOCK, len(ids) - 1)
        logits = logits_of(t[begin:end].unsqueeze(0))[0]
        total += F.cross_entropy(logits.double(), t[begin + 1 : end + 1], reduction="sum").item()
    return total


def test_eval_scores_val_and_text_file_and_results_can_read_it(trained, tiny_run):
    run, run_dir, text = trained
    lines: list[str] = []
    cfg = tiny_run(EVAL_TEXT_FILE=str(text), EVAL_STRIDE=BLOCK, EVAL_BATCH_SIZE=3)
    record = evaluate_run(run_dir, "best", cfg, log=lines.append)
    val, txt = record["sets"]["val"], record["sets"]["text"]
    assert val["tokens"] == load_meta(data_dir(run.data))["val_tokens"] - 1
    assert (val["context"], val["stride"], val["truncated"]) == (BLOCK, BLOCK, False)
    # char: a character per token, so the split's loss per character is its loss per token
    assert val["chars"] == val["tokens"] + 1 and val["loss_per_char"] == pytest.approx(val["loss"])
    model, tok = checkpoint_model(run_dir)
    ids = tok.encode(text.read_text())  # characters: no end-of-text token to prepend
    expected = disjoint_nll(lambda x: model(x, x)[0], ids)
    assert txt["tokens"] == len(ids) - 1 and txt["nll"] == pytest.approx(expected, rel=1e-5)
    assert txt["words"] == len(text.read_text().split())
    assert txt["word_perplexity"] == pytest.approx(math.exp(expected / txt["words"]), rel=1e-5)
    assert txt["bits_per_byte"] == pytest.approx(
        expected / len(text.read_bytes()) / math.log(2), rel=1e-5
    )
    assert record["model"]["step"] == 6 and record["model"]["tokens_seen"] == 6 * 8 * BLOCK
    assert load_eval(run_dir) == {"format": 1, **record}
    assert any(line.startswith("eval val: ppl") for line in lines)


def test_max_tokens_truncates_and_drops_word_figures(trained, tiny_run):
    _, run_dir, text = trained
    record = evaluate_run(
        run_dir,
        "latest",
        tiny_run(EVAL_TEXT_FILE=str(text), EVAL_MAX_TOKENS=100),
        log=lambda _: None,
    )
    for entry in record["sets"].values():
        assert entry["tokens"] == 99 and entry["truncated"] and "word_perplexity" not in entry
        assert entry["stride"] == BLOCK // 2  # EVAL_STRIDE=0: half the context


def test_unreachable_set_stops_before_anything_is_written(trained, tiny_run, offline_hub):
    _, run_dir, _ = trained
    with pytest.raises(DataError, match="wikitext-2.*CONFIG_EVAL_WIKITEXT2"):
        evaluate_run(run_dir, "best", tiny_run(EVAL_WIKITEXT2="y"), log=lambda _: None)
    assert load_eval(run_dir) is None


def test_stride_beyond_the_context_is_an_error(trained, tiny_run):
    _, run_dir, _ = trained
    with pytest.raises(ValueError, match="CONFIG_EVAL_STRIDE=33 exceeds the model's context of 32"):
        evaluate_run(run_dir, "best", tiny_run(EVAL_STRIDE=33), log=lambda _: None)


def test_baseline_scores_like_transformers_own_forward(tiny_run, tmp_path):
    from transformers import GPT2Config, GPT2LMHeadModel

    from lib.data.tokenizers import GPT2Tokenizer

    torch.manual_seed(0)
    hf = GPT2LMHeadModel(
        GPT2Config(n_positions=BLOCK, n_embd=16, n_layer=1, n_head=2, initializer_range=0.1)
    ).eval()
    hf.save_pretrained(tmp_path / "tiny-gpt2")
    gpt2_bpe_tokenizer().save_pretrained(tmp_path / "tiny-gpt2")
    text = tmp_path / "t.txt"
    text.write_text("The quick brown fox jumps over the lazy dog. " * 12)
    cfg = tiny_run(EVAL_TEXT_FILE=str(text), EVAL_STRIDE=BLOCK)  # char data: val is skipped
    record = evaluate_baseline(tmp_path / "tiny-gpt2", cfg, log=lambda _: None)
    assert (tmp_path / "results" / "baseline-tiny-gpt2" / "eval.json").is_file()
    assert "validation split" in record["sets"]["val"]["skipped"]
    ids = [50256] + GPT2Tokenizer().encode(text.read_text())
    with torch.no_grad():
        expected = disjoint_nll(lambda x: hf(x).logits, ids)
    entry = record["sets"]["text"]
    assert entry["tokens"] == len(ids) - 1 and entry["nll"] == pytest.approx(expected, rel=1e-5)
    assert record["model"]["source"] == "pretrained" and record["model"]["block_size"] == BLOCK


@pytest.mark.skipif(
    not os.environ.get("KCONFIG_LLM_GPT2_DIR"),
    reason="set KCONFIG_LLM_GPT2_DIR to a Hugging Face GPT-2 124M folder",
)
def test_real_gpt2_124m_reproduces_the_published_wikitext2_figure(tiny_run):
    """GPT-2 paper, table 3: 29.41 word-level perplexity on WikiText-2, measured on
    text detokenized by rules that were not published. Ours (detokenized, stride
    512) may only come out higher by the rules it misses: accepted from 0.9 to 1.3
    times 29.41. Token-level perplexity (about 20-25) or a broken weight mapping
    (thousands) falls outside. Needs the hub (or its cache) for WikiText-2."""
    from gpt2.hf import load_pretrained

    path = Path(os.environ["KCONFIG_LLM_GPT2_DIR"])
    model, _ = load_pretrained(path)
    assert sum(p.numel() for p in model.parameters()) == 124_439_808
    cfg = tiny_run(EVAL_VAL="n", EVAL_WIKITEXT2="y", DEVICE_AUTO="y")
    wikitext = evaluate_baseline(path, cfg, log=print)["sets"]["wikitext-2"]
    assert wikitext["stride"] == 512 and wikitext["detokenized"]
    assert 0.9 * 29.41 <= wikitext["word_perplexity"] <= 1.3 * 29.41, wikitext
