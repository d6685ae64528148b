"""Evaluation sets: detokenizing WikiText, failing fast offline, local files."""

from __future__ import annotations

import time

import pytest

from lib.data.sources import OFFLINE_VARIABLES, DataError
from lib.eval import sets


def test_detokenize_wikitext_restores_ordinary_prose():
    raw = (
        " = Robert Boulter = \n \n Robert Boulter is an English film @-@ maker . He had "
        '1 @,@ 200 roles ( in 2000 ) , " The Bill " ; it \'s 3 @.@ 5 hours . \n'
        " = = Career = = \n"
    )
    assert sets.detokenize_wikitext(raw) == (
        "= Robert Boulter =\n\nRobert Boulter is an English film-maker. He had 1,200 roles "
        '(in 2000), "The Bill"; it\'s 3.5 hours.\n== Career ==\n'
    )


@pytest.mark.parametrize(
    "name,symbol",
    [
        ("wikitext-2", "EVAL_WIKITEXT2"),
        ("wikitext-103", "EVAL_WIKITEXT103"),
        ("lambada", "EVAL_LAMBADA"),
    ],
)
def test_hub_sets_fail_at_once_offline_naming_the_option(offline_hub, name, symbol, monkeypatch):
    # "at once": no retry waits (a clock would measure the host's load, not the code)
    monkeypatch.setattr(time, "sleep", lambda s: pytest.fail(f"waited {s} s before failing"))
    with pytest.raises(DataError) as err:
        sets.wikitext(name, True) if name != "lambada" else sets.lambada()
    assert f"CONFIG_{symbol}" in str(err.value) and "not in the datasets cache" in str(err.value)
    assert offline_hub[0][0] == sets.HUB_SETS[name][0]  # the cache was asked, nothing else


def test_hub_sets_come_from_the_datasets_cache_offline(offline_hub, monkeypatch):
    import datasets

    rows = ["", " = Title = \n", "", " A line @-@ here . \n"]
    monkeypatch.setattr(datasets, "load_dataset", lambda *a, **k: [{"text": r} for r in rows])
    s = sets.wikitext("wikitext-2", detokenize=False)
    assert s.text == "\n = Title = \n\n A line @-@ here . \n" and s.words == 8
    assert sets.wikitext("wikitext-2", detokenize=True).text == "\n= Title =\n\nA line-here.\n"


@pytest.mark.parametrize("name", OFFLINE_VARIABLES)
def test_offline_error_names_the_variable_that_is_set(offline_hub, monkeypatch, name):
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setenv(name, "true")
    with pytest.raises(DataError) as err:
        sets.lambada()
    message = str(err.value)
    assert f"{name} is set and the set is not in the datasets cache" in message
    assert f"Connect to the network (and unset {name}), or turn CONFIG_EVAL_LAMBADA off" in message
    assert [n for n in OFFLINE_VARIABLES if n in message] == [name]


def test_unreachable_hub_is_reported_with_the_cause(monkeypatch):
    import huggingface_hub

    def refused(*args, **kwargs):
        raise ConnectionError("connection refused")

    monkeypatch.setenv("HF_DATASETS_OFFLINE", "0")  # set, but off: the hub is asked
    monkeypatch.setattr(huggingface_hub.HfApi, "dataset_info", refused)
    with pytest.raises(DataError) as err:
        sets.wikitext("wikitext-2", False)
    message = str(err.value)
    assert "ConnectionError: connection refused" in message and "CONFIG_EVAL_WIKITEXT2" in message
    # no offline switch is on, so none is blamed
    assert "Connect to the network, or turn" in message and "OFFLINE" not in message


def test_text_file_counts_words_and_missing_file_names_the_option(tmp_path):
    path = tmp_path / "t.txt"
    path.write_text("one two\nthree  four five\n")
    s = sets.text_file(str(path))
    assert s.words == 5 and s.text.startswith("one") and s.source == str(path)
    with pytest.raises(DataError, match="CONFIG_EVAL_TEXT_FILE=.*is not a file"):
        sets.text_file(str(tmp_path / "missing.txt"))


def test_validation_split_needs_a_prepared_dataset(tmp_path):
    with pytest.raises(DataError, match="holds no prepared dataset.*make prepare.*CONFIG_EVAL_VAL"):
        sets.validation_split(tmp_path / "nothing")
