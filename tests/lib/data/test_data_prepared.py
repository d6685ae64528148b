"""ensure_prepared: runs started together tokenize a corpus once."""

from __future__ import annotations

import multiprocessing
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from lib.data import corpus, is_prepared, load_meta
from lib.data.prepared import ensure_prepared
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


def _prepare(run, start, said) -> None:
    start.wait()
    ensure_prepared(run, log=said.put)


def test_runs_started_together_prepare_the_data_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Slow tokenizing down so both processes are inside ensure_prepared at once
    # (without the lock the second rename failed with ENOTEMPTY).
    write_splits = corpus._write_splits
    monkeypatch.setattr(corpus, "_write_splits", lambda *a: (time.sleep(0.5), write_splits(*a))[1])
    run = _run(tmp_path)
    ctx = multiprocessing.get_context("fork")
    start, said = ctx.Barrier(3), ctx.Queue()
    procs = [ctx.Process(target=_prepare, args=(run, start, said)) for _ in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0, 0]
    messages = []
    while not said.empty():
        messages.append(said.get())
    assert len(messages) == 1 and messages[0].startswith("preparing dataset 'custom'")
    out = next((tmp_path / "data").glob("custom_*-char"))
    assert is_prepared(out) and load_meta(out)["vocab_size"] > 10
    # Nothing is left behind but the data.
    assert [p.name for p in (tmp_path / "data").iterdir()] == [out.name]


def test_install_survives_a_copy_that_appears_between_check_and_rename(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = corpus.prepare(
        "custom", "char", tmp_path / "out", custom_path=str(synthetic_corpus(tmp_path / "c.txt"))
    )
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "meta.json").write_text("{}")
    monkeypatch.setattr(Path, "exists", lambda self: False)  # the check ran before theirs landed
    corpus._install(mine, out)
    assert [p.name for p in out.iterdir()] == ["meta.json"]
    assert not mine.exists()
