"""Token files are checked when a run opens them: what was found, what was done."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from lib.data import DataError, load_meta
from lib.data.loader import BatchLoader
from lib.data.meta import FORMAT_VERSION
from lib.data.prepared import data_dir, ensure_prepared
from lib.data.tokenfile import END_BYTES, ends_digest
from lib.data.validate import check_prepared, inspect
from tests.lib.conftest import synthetic_corpus


def _run(tmp_path: Path) -> SimpleNamespace:
    return SimpleNamespace(
        GPT2_DATASET="custom",
        DATA_CUSTOM_PATH=str(synthetic_corpus(tmp_path / "c.txt")),
        DATA_DIR=str(tmp_path / "data"),
        DATA_TOKENIZER="char",
        DATA_TOKEN_CAP=0,
        DATA_BPE_VOCAB_SIZE=0,
        DATA_VAL_FRACTION=0.1,
    )


@pytest.fixture
def prepared(tmp_path: Path) -> tuple[SimpleNamespace, Path]:
    run = _run(tmp_path)
    return run, ensure_prepared(run, log=lambda _: None)


def _poke(path: Path, position: int, token: int, dtype: str = "uint16") -> None:
    """Overwrite one token of a .bin file in place."""
    data = np.memmap(path, dtype=dtype, mode="r+")
    data[position] = token
    data.flush()
    del data


def test_preparation_records_the_checksum_of_each_file_s_ends(prepared):
    _, folder = prepared
    meta = load_meta(folder)
    for split in ("train", "val"):
        assert meta["checksums"][split] == ends_digest(folder / f"{split}.bin", 2)
    assert inspect(folder).state == "ok"


def test_out_of_range_id_is_refused_naming_file_position_and_id(prepared):
    run, folder = prepared
    vocab = load_meta(folder)["vocab_size"]
    _poke(folder / "val.bin", 7, vocab + 3)
    before = (folder / "val.bin").read_bytes()
    said: list[str] = []
    with pytest.raises(DataError) as err:
        ensure_prepared(run, log=said.append)
    message = str(err.value)
    assert f"{folder / 'val.bin'} holds token id {vocab + 3:,} at position 7" in message
    assert f"has {vocab:,} ids (0 to {vocab - 1:,})" in message
    assert f"Delete {folder}" in message and "make prepare" in message
    assert "\n" not in message and said == []
    assert (folder / "val.bin").read_bytes() == before  # neither used nor replaced
    with pytest.raises(DataError, match="holds token id"):
        BatchLoader(folder, "train", 2, 8)  # a reader refuses it too


def test_a_changed_file_with_ids_in_range_is_refused_by_its_checksum(prepared):
    run, folder = prepared
    data = np.fromfile(folder / "train.bin", dtype=np.uint16)
    _poke(folder / "train.bin", 0, int(data[1]) if data[1] != data[0] else int(data[0]) ^ 1)
    with pytest.raises(DataError, match=r"train.bin changed after it was prepared: the SHA-256"):
        ensure_prepared(run, log=lambda _: None)


def test_truncated_file_is_prepared_again_with_a_notice(prepared):
    run, folder = prepared
    meta = load_meta(folder)
    size = (folder / "train.bin").stat().st_size
    with open(folder / "train.bin", "r+b") as f:
        f.truncate(size - 3)  # cut mid-token, as an interrupted copy does
    said: list[str] = []
    assert ensure_prepared(run, log=said.append) == folder
    notice = said[0]
    assert notice.startswith(
        f"data: {folder / 'train.bin'} is {size - 3:,} bytes, but meta.json "
        f"records {meta['train_tokens']:,} tokens of 2 bytes = {size:,} bytes"
    )
    assert "not a whole number of uint16 tokens (cut short)" in notice
    assert f"Preparing the dataset again from {meta['source']}, which replaces {folder}" in notice
    assert said[1].startswith("preparing dataset 'custom'")
    assert (folder / "train.bin").stat().st_size == size and inspect(folder).state == "ok"
    assert ensure_prepared(run, log=said.append) == folder and len(said) == 2  # once


def test_a_reader_that_cannot_prepare_says_who_can(prepared):
    _, folder = prepared
    (folder / "val.bin").unlink()
    with pytest.raises(DataError) as err:
        check_prepared(folder)
    assert str(err.value).startswith(f"{folder / 'val.bin'} is missing (meta.json records ")
    assert "Run `make prepare` with the run's configuration" in str(err.value)


def test_a_folder_without_meta_json_is_not_ours_and_is_left_alone(tmp_path):
    run = _run(tmp_path)
    folder = data_dir(run)
    folder.mkdir(parents=True)
    (folder / "train.bin").write_bytes(b"\x01\x00" * 100)  # someone's own tokens
    with pytest.raises(DataError) as err:
        ensure_prepared(run, log=lambda _: None)
    assert f"{folder} holds train.bin but no meta.json: it was not prepared by this project" in str(
        err.value
    )
    assert [p.name for p in folder.iterdir()] == ["train.bin"]


def test_an_unreadable_meta_json_is_prepared_again(prepared):
    run, folder = prepared
    (folder / "meta.json").write_text("{ truncated")
    said: list[str] = []
    ensure_prepared(run, log=said.append)
    assert said[0].startswith(f"data: {folder / 'meta.json'} is unreadable")
    assert json.loads((folder / "meta.json").read_text())["checksums"]


def test_ends_of_a_large_file_are_checked_and_the_loader_catches_the_middle(tmp_path):
    # 3 MiB of uint16 tokens: the first and last MiB are read on open, the
    # middle only when a batch draws it.
    n = 3 * END_BYTES // 2
    train = np.arange(n) % 1000
    train[n // 2 - 1000 : n // 2 + 1000] = 4242  # beyond the vocabulary, in the middle
    folder = tmp_path / "d"
    folder.mkdir()
    train.astype(np.uint16).tofile(folder / "train.bin")
    (np.arange(500) % 1000).astype(np.uint16).tofile(folder / "val.bin")
    meta = {
        "format_version": FORMAT_VERSION,
        "dataset": "synthetic",
        "source": "test",
        "tokenizer": {"name": "char", "vocab_size": 1000},
        "vocab_size": 1000,
        "dtype": "uint16",
        "train_tokens": n,
        "val_tokens": 500,
    }
    (folder / "meta.json").write_text(json.dumps(meta))
    assert inspect(folder).state == "ok"  # old meta without checksums: ends in range
    loader = BatchLoader(folder, "train", 64, 256, seed=3)
    with pytest.raises(DataError) as err:
        for _ in range(200):
            loader.next_batch()
    message = str(err.value)
    assert f"{folder / 'train.bin'} holds token id 4,242 at position " in message
    position = int(re.search(r" at position ([\d,]+), but", message).group(1).replace(",", ""))
    assert n // 2 - 1000 <= position < n // 2 + 1000 and train[position] == 4242
    assert "has 1,000 ids (0 to 999)" in message

    _poke(folder / "train.bin", n - 5, 1000)  # the last MiB: found on open
    with pytest.raises(DataError, match=f"holds token id 1,000 at position {n - 5:,}"):
        BatchLoader(folder, "train", 2, 8)
