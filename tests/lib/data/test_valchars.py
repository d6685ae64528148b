"""The validation loss per character: the split's characters counted exactly,
cached beside meta.json without touching it, and recorded by every run."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from lib.data import load_meta, prepare, tokenizer_from_meta, valchars
from lib.data.meta import SPLIT_FILES
from lib.data.valchars import count_chars, val_chars
from lib.train.naming import create_run_dir
from lib.train.trainer import Trainer

ASSETS = Path(__file__).resolve().parents[2] / "assets"
PLAY = (ASSETS / "play_sample.md").read_text()


def _corpus(tmp_path: Path) -> Path:
    folder = tmp_path / "plays"
    folder.mkdir()
    for i in range(4):  # four documents: the BPE stream has end-of-text tokens
        (folder / f"play{i}.md").write_text(PLAY.replace("ROMEO", f"ROMEO{i}"))
    return folder


def _prepared(tmp_path: Path, tokenizer: str, **kw) -> tuple[Path, dict]:
    out = prepare(
        "custom",
        tokenizer,
        tmp_path / f"data-{tokenizer}",
        custom_path=str(_corpus(tmp_path)),
        val_fraction=0.3,
        **kw,
    )
    return out, load_meta(out)


def _val_ids(folder: Path, meta: dict) -> np.ndarray:
    return np.fromfile(folder / SPLIT_FILES["val"], dtype=np.dtype(meta["dtype"]))


def test_char_split_has_one_character_per_token(tmp_path):
    folder, meta = _prepared(tmp_path, "char")
    assert val_chars(folder, meta) == meta["val_tokens"] > 100


def test_bpe_split_counts_the_characters_its_ids_decode_to(tmp_path):
    folder, meta = _prepared(tmp_path, "bpe", bpe_vocab_size=400)
    before = (folder / "meta.json").read_bytes()
    ids, tok = _val_ids(folder, meta), tokenizer_from_meta(meta)
    assert tok.eot_token in ids  # the split crosses a document boundary
    text = tok.decode([int(i) for i in ids if i != tok.eot_token])
    chars = val_chars(folder, meta)
    assert chars == len(text) and chars > 1.5 * meta["val_tokens"]  # merges were learnt
    assert (folder / "meta.json").read_bytes() == before  # the dataset's record is untouched
    cached = json.loads((folder / valchars.FILE).read_text())
    assert cached["val_chars"] == chars and cached["val_tokens"] == meta["val_tokens"]


def test_the_count_is_read_back_while_it_describes_the_split(tmp_path, monkeypatch):
    folder, meta = _prepared(tmp_path, "bpe", bpe_vocab_size=300)
    first = val_chars(folder, meta)

    def recount(*_):
        raise AssertionError("counted again")

    monkeypatch.setattr(valchars, "count_chars", recount)
    assert val_chars(folder, meta) == first  # from val_chars.json
    other = {**meta, "checksums": {**meta["checksums"], "val": "0" * 64}}
    with pytest.raises(AssertionError, match="counted again"):
        val_chars(folder, other)  # another split: the cached count is not its own
    (folder / valchars.FILE).write_text("{not json")
    with pytest.raises(AssertionError, match="counted again"):
        val_chars(folder, meta)


def test_documents_and_long_pieces_decode_separately_without_losing_characters(monkeypatch):
    from lib.data.tokenizers import build_tokenizer

    tok = build_tokenizer("bpe", PLAY * 3, vocab_size=300)
    docs = ["ROMEO: a rose\n", "JULIET: by any other name\n"]
    ids = np.array(tok.encode(docs[0]) + [tok.eot_token] + tok.encode(docs[1]) + [tok.eot_token])
    assert count_chars(ids, tok) == sum(map(len, docs))
    char = build_tokenizer("char", PLAY)
    monkeypatch.setattr(valchars, "MAX_PIECE", 7)  # pieces of 7 ids: exact for char
    assert count_chars(np.array(char.encode(PLAY)), char) == len(PLAY)


@pytest.mark.slow  # a training run; the char case is in tests/lib/train/test_trainer.py
def test_a_bpe_run_records_its_validation_loss_per_character(tiny_run):
    run = tiny_run(
        GPT2_MAX_ITERS=10,
        GPT2_EVAL_INTERVAL=5,
        RUN_NAME="bpe",
        DATA_TOKENIZER_BPE="y",
        DATA_BPE_VOCAB_SIZE="300",
    )
    lines: list[str] = []
    run_dir = create_run_dir(run)
    Trainer(run, run_dir, log=lines.append).train()
    m = json.loads((run_dir / "metrics.json").read_text())
    folder = Path(run.DATA_DIR)
    (data,) = [p for p in folder.iterdir() if (p / "meta.json").is_file()]
    meta = load_meta(data)
    ids, tok = _val_ids(data, meta), tokenizer_from_meta(meta)
    decoded = len(tok.decode([int(i) for i in ids if i != tok.eot_token]))
    ratio = meta["val_tokens"] / decoded
    assert m["val_chars"] == decoded and m["val_tokens_per_char"] == pytest.approx(ratio)
    assert ratio < 0.7  # fewer tokens than characters: the loss per char is the smaller
    assert m["best_val_loss_per_char"] == pytest.approx(m["best_val_loss"] * ratio)
    assert m["final_val_loss_per_char"] == pytest.approx(m["final_val_loss"] * ratio)
    per_char = m["val_loss_per_char"]
    assert per_char["iters"] == m["val_loss"]["iters"] == [5, 10]
    assert per_char["values"] == pytest.approx([v * ratio for v in m["val_loss"]["values"]])
    evals = [line for line in lines if line.startswith("eval step")]
    assert len(evals) == 2 and all("nats/char" in line for line in evals)
    assert f"{per_char['values'][-1]:.4f} nats/char" in evals[-1]
    assert not math.isnan(m["best_val_loss_per_char"])
