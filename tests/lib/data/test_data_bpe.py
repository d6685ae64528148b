"""The trained byte-level BPE: training, round trips, meta.json, train-split only."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch

from lib.data import (
    DataError,
    build_tokenizer,
    corpus,
    load_meta,
    meta,
    prepare,
    tokenizer_from_meta,
)
from lib.data.prepared import data_dir
from lib.data.sources import Source
from lib.data.tokenizers.bpe import BPETokenizer, split_text
from lib.model import registry
from lib.run.checkpoint import load_checkpoint
from lib.train.naming import create_run_dir
from lib.train.trainer import Trainer

ASSETS = Path(__file__).resolve().parents[2] / "assets"
PLAY = (ASSETS / "play_sample.md").read_text()


def test_round_trip_of_any_text_with_a_small_vocabulary():
    tok = build_tokenizer("bpe", PLAY * 20, vocab_size=300)
    assert tok.name == "bpe" and 257 < tok.vocab_size <= 300
    for text in (PLAY, "Ünïcödé, 日本語 and emoji 🎭 never seen in training", "  \n\t x"):
        assert tok.decode(tok.encode(text)) == text
    assert len(tok.encode(PLAY)) < 0.8 * len(PLAY.encode())  # 43 merges were learnt
    larger = build_tokenizer("bpe", PLAY * 20, vocab_size=1000)
    assert len(larger.encode(PLAY)) < 0.7 * len(tok.encode(PLAY))


def test_end_of_text_written_in_a_document_is_plain_text():
    tok = build_tokenizer("bpe", PLAY, vocab_size=300)
    ids = tok.encode("a <|endoftext|> b")
    assert tok.eot_token == 0 and tok.eot_token not in ids
    assert tok.decode(ids + [tok.eot_token]) == "a <|endoftext|> b<|endoftext|>"


def test_rebuilt_from_meta_gives_the_same_ids():
    tok = build_tokenizer("bpe", PLAY * 5, vocab_size=280)
    again = tokenizer_from_meta(json.loads(json.dumps(tok.to_meta())))
    assert again.encode(PLAY) == tok.encode(PLAY) and again.vocab_size == tok.vocab_size
    meta = tok.to_meta()
    meta["json"] = meta["json"].replace('"Whitespace"', '"WhitespaceX"', 1) + " "
    with pytest.raises(ValueError, match="sha256"):
        tokenizer_from_meta(meta)


def test_vocabulary_below_the_byte_alphabet_is_refused():
    with pytest.raises(ValueError, match="at least 257"):
        BPETokenizer.train(["abc"], 256)


def test_text_split_cuts_the_last_fraction_at_a_line_end():
    docs = ["line one\nline two\n", "line three\nline four\n"]  # 38 characters
    train, val = split_text(docs, 0.25)
    assert "".join(train) + "".join(val) == "".join(docs)
    assert train == ["line one\nline two\n", "line three\n"] and val == ["line four\n"]
    with pytest.raises(DataError, match="too few"):
        split_text(["x"], 0.1)


def _fake_source(monkeypatch, docs: list[str]) -> None:
    def read(split: str) -> Iterator[str]:
        yield from docs

    src = Source(name="fake", origin="test", read=read)
    monkeypatch.setattr(corpus, "open_source", lambda dataset, custom_path=None: src)


def test_prepared_bpe_never_sees_the_validation_text(tmp_path, monkeypatch):
    train_text = PLAY * 10
    val_text = "qxqxqx zvzvzv\n" * 200  # frequent, so a tokenizer that saw it would merge it
    _fake_source(monkeypatch, [train_text + val_text])
    fraction = len(val_text) / (len(train_text) + len(val_text))
    out = prepare("fake", "bpe", tmp_path / "d", val_fraction=fraction, bpe_vocab_size=400)
    meta = load_meta(out)
    tok = tokenizer_from_meta(meta)
    pieces = [tok.decode([i]) for i in range(tok.vocab_size)]
    assert not [p for p in pieces if "qx" in p or "zv" in p]
    assert meta["val_from"].startswith(f"last {fraction}")
    train = np.fromfile(out / "train.bin", dtype=meta["dtype"]).tolist()
    val = np.fromfile(out / "val.bin", dtype=meta["dtype"]).tolist()
    assert tok.decode(train) == train_text + "<|endoftext|>"
    assert tok.decode(val) == val_text + "<|endoftext|>"


def test_meta_json_records_the_tokenizer_and_its_file(tmp_path, monkeypatch):
    _fake_source(monkeypatch, [PLAY * 30])
    out = prepare("fake", "bpe", tmp_path / "d", bpe_vocab_size=350)
    meta = json.loads((out / "meta.json").read_text())
    tokmeta = meta["tokenizer"]
    assert tokmeta["name"] == "bpe" and tokmeta["requested_vocab_size"] == 350
    assert tokmeta["vocab_size"] == meta["vocab_size"] <= 350 and tokmeta["eot_token"] == 0
    assert tokmeta["file"] == "tokenizer.json"
    assert (out / "tokenizer.json").read_text() == tokmeta["json"]
    assert json.loads(tokmeta["json"])["model"]["type"] == "BPE"
    assert meta["dtype"] == "uint16" and meta["train_tokens"] > 0 and meta["val_tokens"] > 0


def test_the_vocabulary_size_is_part_of_the_data_key(tiny_run):
    small = tiny_run(DATA_TOKENIZER_BPE="y", DATA_TOKENIZER_CHAR="n", DATA_BPE_VOCAB_SIZE=300)
    large = tiny_run(DATA_TOKENIZER_BPE="y", DATA_TOKENIZER_CHAR="n", DATA_BPE_VOCAB_SIZE=8192)
    assert data_dir(small.data).name.endswith("-bpe300")
    assert data_dir(large.data).name.endswith("-bpe8192")
    assert data_dir(large.data) != data_dir(small.data)
    assert meta.dataset_dir_name("shakespeare", "bpe", 0, 8192) == "shakespeare-bpe8192"


def test_a_tiny_run_trains_and_samples_with_the_trained_bpe(tiny_run):
    cfg = tiny_run(
        DATA_TOKENIZER_BPE="y",
        DATA_TOKENIZER_CHAR="n",
        DATA_BPE_VOCAB_SIZE=400,
        GPT2_MAX_ITERS=40,
        GPT2_EVAL_INTERVAL=20,
        RUN_NAME="bpe",
    )
    run_dir = create_run_dir(cfg)
    summary = Trainer(cfg, run_dir, log=lambda _: None).train()
    assert summary["tokenizer"] == "bpe" and summary["status"] == "completed"
    vocab = summary["model_config"]["vocab_size"]
    assert vocab == load_meta(data_dir(cfg.data))["vocab_size"] <= 400
    val = summary["val_loss"]["values"]
    assert val[-1] < val[0] < math.log(vocab)
    state = load_checkpoint(run_dir / "ckpt_best.pt")
    tok = tokenizer_from_meta(state["tokenizer"])  # what `make sample` does
    family = registry.family(state["family"])
    model = family.build(family.config_cls(**state["model_config"]))
    model.load_state_dict(state["model"])
    prompt = tok.encode("ROMEO:")
    out = model.eval().generate(torch.tensor([prompt]), 12, temperature=0, top_k=None)
    text = tok.decode(out[0].tolist())
    assert text.startswith("ROMEO:") and len(out[0]) == len(prompt) + 12
