"""prepare(): tokens on disk, meta.json, atomic replacement, read-back checks."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from lib.data import DataError, corpus, is_prepared, load_meta, prepare, tokenizer_from_meta
from lib.data.meta import FORMAT_VERSION, dataset_dir_name
from lib.data.sources import Source

ASSETS = Path(__file__).resolve().parents[2] / "assets"
CUSTOM = ASSETS / "custom_corpus"
EOT = 50256


def _tokens(out: Path, split: str) -> np.ndarray:
    meta = load_meta(out)
    return np.fromfile(out / f"{split}.bin", dtype=np.dtype(meta["dtype"]))


def _fake_source(
    monkeypatch: pytest.MonkeyPatch,
    train: list[str],
    val: list[str] | None = None,
    fail_after: int | None = None,
    error: BaseException | None = None,
) -> None:
    """Make prepare() read the given documents instead of a real dataset."""

    def read(split: str) -> Iterator[str]:
        for i, doc in enumerate(train if split == "train" else val or []):
            if fail_after is not None and i == fail_after:
                raise error or RuntimeError("source broke mid-way")
            yield doc

    src = Source(name="fake", origin="test", read=read, has_val_split=val is not None)
    monkeypatch.setattr(corpus, "open_source", lambda dataset, custom_path=None: src)


def test_char_prepare_splits_the_last_tenth_for_validation(tmp_path: Path) -> None:
    out = prepare("custom", "char", tmp_path / "c", custom_path=str(CUSTOM / "a.txt"))
    text = "First file.\nIt has two lines.\n\n"  # documents end with one blank line
    meta = load_meta(out)
    assert meta["train_tokens"] == int(len(text) * 0.9) == 27
    assert meta["val_tokens"] == len(text) - 27 == 4
    assert meta["vocab_size"] == len(set(text)) == 17
    assert meta["dtype"] == "uint16"
    tok = tokenizer_from_meta(meta)
    assert (
        tok.decode(_tokens(out, "train").tolist()) + tok.decode(_tokens(out, "val").tolist())
        == text
    )


def test_meta_records_how_the_data_was_made(tmp_path: Path) -> None:
    out = prepare("custom", "gpt2", tmp_path / "g", custom_path=str(CUSTOM), val_fraction=0.25)
    meta = json.loads((out / "meta.json").read_text())
    assert meta["format_version"] == FORMAT_VERSION
    assert meta["dataset"] == "custom"
    assert meta["source"] == str(CUSTOM.resolve())
    assert meta["tokenizer"] == {"name": "gpt2", "vocab_size": 50257, "eot_token": EOT}
    assert (meta["vocab_size"], meta["token_cap"], meta["val_fraction"]) == (50257, 0, 0.25)
    assert meta["created"].endswith("+00:00")
    n = meta["train_tokens"] + meta["val_tokens"]
    assert meta["train_tokens"] == int(n * 0.75)
    assert (out / "train.bin").stat().st_size == 2 * meta["train_tokens"]


def test_gpt2_documents_are_each_followed_by_end_of_text(tmp_path: Path) -> None:
    out = prepare("custom", "gpt2", tmp_path / "g", custom_path=str(CUSTOM))
    ids = np.concatenate([_tokens(out, "train"), _tokens(out, "val")]).tolist()
    assert ids.count(EOT) == 3 and ids[-1] == EOT
    tok = tokenizer_from_meta(load_meta(out))
    docs = [tok.decode(ids[a + 1 : b]) for a, b in zip([-1] + _eots(ids)[:-1], _eots(ids))]
    assert docs[1] == "# Notes\n\nSecond file, in Markdown.\n"


def _eots(ids: list[int]) -> list[int]:
    return [i for i, t in enumerate(ids) if t == EOT]


def test_token_cap_stops_reading_at_exactly_the_cap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    read: list[int] = []

    def docs() -> Iterator[str]:
        for i in range(100_000):
            read.append(i)
            yield f"Document number {i} says hello.\n"

    monkeypatch.setattr(
        corpus, "open_source", lambda d, c=None: Source("fake", "test", lambda s: docs())
    )
    out = prepare("finewebedu", "gpt2", tmp_path / "capped", token_cap=1000)
    meta = load_meta(out)
    assert (meta["train_tokens"], meta["val_tokens"], meta["token_cap"]) == (900, 100, 1000)
    assert len(read) < 5_000  # one small batch read, not the 100k stream


def test_own_validation_split_is_used_and_capped_in_proportion(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fake_source(monkeypatch, train=["Hello world"] * 200, val=["Hi"] * 200)
    out = prepare("tinystories", "gpt2", tmp_path / "ts", token_cap=300, val_fraction=0.1)
    meta = load_meta(out)
    assert (meta["train_tokens"], meta["val_tokens"]) == (300, 30)
    assert meta["val_from"] == "dataset validation split"
    assert _tokens(out, "val").tolist()[:4] == [17250, EOT, 17250, EOT]  # "Hi" only comes from val


def test_failure_mid_way_leaves_no_output(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_source(monkeypatch, train=["Hello world"] * 50, fail_after=20)
    with pytest.raises(RuntimeError, match="mid-way"):
        prepare("shakespeare", "gpt2", tmp_path / "out")
    assert list(tmp_path.iterdir()) == []


def test_interrupt_keeps_the_previous_good_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = prepare("custom", "gpt2", tmp_path / "out", custom_path=str(CUSTOM))
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    _fake_source(monkeypatch, train=["Hello world"] * 50, fail_after=20, error=KeyboardInterrupt())
    with pytest.raises(KeyboardInterrupt):
        prepare("custom", "gpt2", out)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert [p.name for p in tmp_path.iterdir()] == ["out"]
    assert is_prepared(out)


def test_preparing_again_replaces_the_old_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = prepare("custom", "char", tmp_path / "out", custom_path=str(CUSTOM / "a.txt"))
    _fake_source(monkeypatch, train=["abcdefghij" * 10])
    prepare("custom", "char", out)
    assert load_meta(out)["vocab_size"] == 11  # a-j and the newline separator
    assert [p.name for p in tmp_path.iterdir()] == ["out"]
    assert oct(out.stat().st_mode & 0o777) != oct(0o700)  # not mkdtemp's private mode


def test_partial_folder_of_a_killed_run_is_removed(tmp_path: Path) -> None:
    stale = tmp_path / ".out.partial-999999999-abc"  # no such pid
    stale.mkdir()
    (stale / "train.bin").write_bytes(b"\0" * 10)
    prepare("custom", "char", tmp_path / "out", custom_path=str(CUSTOM / "a.txt"))
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


def test_bad_arguments_fail_before_anything_is_written(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="gpt2, char"):
        prepare("shakespeare", "words", tmp_path / "a")
    with pytest.raises(ValueError, match="val_fraction"):
        prepare("shakespeare", "gpt2", tmp_path / "a", val_fraction=0.0)
    with pytest.raises(DataError, match="does not exist"):
        prepare("custom", "gpt2", tmp_path / "a", custom_path=str(tmp_path / "missing.txt"))
    assert list(tmp_path.iterdir()) == []


def test_too_little_text_for_a_validation_split_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fake_source(monkeypatch, train=[])
    with pytest.raises(DataError, match="Only 0 tokens"):
        prepare("custom", "gpt2", tmp_path / "tiny")
    assert list(tmp_path.iterdir()) == []


def test_is_prepared_detects_missing_truncated_and_corrupt_data(tmp_path: Path) -> None:
    assert not is_prepared(tmp_path / "none")
    out = prepare("custom", "gpt2", tmp_path / "g", custom_path=str(CUSTOM))
    assert is_prepared(out)
    with open(out / "val.bin", "r+b") as f:
        f.truncate(2)
    assert not is_prepared(out)
    (out / "meta.json").write_text("{not json")
    assert not is_prepared(out)
    with pytest.raises(DataError, match="unreadable"):
        load_meta(out)
    (out / "meta.json").unlink()
    with pytest.raises(DataError, match="meta.json is missing"):
        load_meta(out)


def test_load_meta_refuses_another_format_version(tmp_path: Path) -> None:
    out = prepare("custom", "char", tmp_path / "c", custom_path=str(CUSTOM / "a.txt"))
    meta = json.loads((out / "meta.json").read_text())
    (out / "meta.json").write_text(json.dumps({**meta, "format_version": 99}))
    with pytest.raises(DataError, match="format version 99"):
        load_meta(out)


def test_token_dtype_widens_only_for_large_vocabularies() -> None:
    assert corpus.token_dtype(50257) == np.uint16
    assert corpus.token_dtype(65535) == np.uint16
    assert corpus.token_dtype(65536) == np.uint32
    assert corpus.token_dtype(100277) == np.uint32


def test_dataset_dir_name_includes_the_cap() -> None:
    assert dataset_dir_name("shakespeare", "gpt2") == "shakespeare-gpt2"
    assert dataset_dir_name("finewebedu", "gpt2", 10**6) == "finewebedu-gpt2-cap1000000"


def test_embedded_shakespeare_prepares_1_5m_gpt2_tokens(tmp_path: Path) -> None:
    out = prepare("shakespeare", "gpt2", tmp_path / "shakespeare-gpt2")
    meta = load_meta(out)
    total = meta["train_tokens"] + meta["val_tokens"]
    assert 1_400_000 < total < 1_700_000
    assert meta["val_tokens"] == total - int(total * 0.9)
    train, val = _tokens(out, "train"), _tokens(out, "val")
    assert int((train == EOT).sum() + (val == EOT).sum()) == 38  # one per play
    assert int(train.max()) < 50257 and val[-1] == EOT
    assert is_prepared(out)


def test_embedded_shakespeare_prepares_5m_characters(tmp_path: Path) -> None:
    out = prepare("shakespeare", "char", tmp_path / "shakespeare-char")
    meta = load_meta(out)
    assert 4_800_000 < meta["train_tokens"] + meta["val_tokens"] < 5_200_000
    assert 60 <= meta["vocab_size"] <= 100
    tok = tokenizer_from_meta(meta)
    assert tok.decode(_tokens(out, "train")[:26].tolist()) == "A Midsummer Night's Dream\n"
