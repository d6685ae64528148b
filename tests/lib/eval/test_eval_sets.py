"""Evaluation sets: detokenizing WikiText, failing fast offline, local files."""
from __future__ import annotations

import time

import pytest

from lib.data.sources import DataError
from lib.eval import sets


def test_detokenize_wikitext_restores_ordinary_prose():
    raw = (" = Robert Boulter = \n \n Robert Boulter is an English film @-@ maker . He had "
           "1 @,@ 200 roles ( in 2000 ) , \" The Bill \" ; it 's 3 @.@ 5 hours . \n"
           " = = Career = = \n")
    assert sets.detokenize_wikitext(raw) == (
        "= Robert Boulter =\n\nRobert Boulter is an English film-maker. He had 1,200 roles "
        "(in 2000), \"The Bill\"; it's 3.5 hours.\n== Career ==\n")


@pytest.mark.parametrize("name,symbol", [("wikitext-2", "EVAL_WIKITEXT2"),
                                         ("wikitext-103", "EVAL_WIKITEXT103"),
                                         ("lambada", "EVAL_LAMBADA")])
def test_hub_sets_fail_at_once_offline_naming_the_option(offline_hub, name, symbol):
    started = time.monotonic()
    with pytest.raises(DataError) as err:
        sets.wikitext(name, True) if name != "lambada" else sets.lambada()
    assert time.monotonic() - started < 1.0
    assert f"CONFIG_{symbol}" in str(err.value) and "not in the datasets cache" in str(err.value)
    assert offline_hub[0][0] == sets.HUB_SETS[name][0]  # the cache was asked, nothing else


def test_hub_sets_come_from_the_datasets_cache_offline(offline_hub, monkeypatch):
    import datasets

    rows = ["", " = Title = \n", "", " A line @-@ here . \n"]
    monkeypatch.setattr(datasets, "load_dataset", lambda *a, **k: [{"text": r} for r in rows])
    s = sets.wikitext("wikitext-2", detokenize=False)
    assert s.text == "\n = Title = \n\n A line @-@ here . \n" and s.words == 8
    assert sets.wikitext("wikitext-2", detokenize=True).text == "\n= Title =\n\nA line-here.\n"


def test_unreachable_hub_is_reported_with_the_cause(monkeypatch):
    import huggingface_hub

    def refused(*args, **kwargs):
        raise ConnectionError("connection refused")

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(huggingface_hub.HfApi, "dataset_info", refused)
    with pytest.raises(DataError, match="ConnectionError: connection refused.*EVAL_WIKITEXT2"):
        sets.wikitext("wikitext-2", False)


def test_text_file_counts_words_and_missing_file_names_the_option(tmp_path):
    path = tmp_path / "t.txt"
    path.write_text("one two\nthree  four five\n")
    s = sets.text_file(str(path))
    assert s.words == 5 and s.text.startswith("one") and s.source == str(path)
    with pytest.raises(DataError, match="CONFIG_EVAL_TEXT_FILE=.*is not a file"):
        sets.text_file(str(tmp_path / "missing.txt"))


def test_validation_split_needs_a_prepared_dataset(tmp_path):
    with pytest.raises(DataError, match="missing or incomplete.*CONFIG_EVAL_VAL"):
        sets.validation_split(tmp_path / "nothing")
