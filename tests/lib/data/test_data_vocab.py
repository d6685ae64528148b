"""The vocabulary a run's model is built with (lib/data/vocab.py), the one rule
the config check, `make estimate` and `make bench` share."""

from __future__ import annotations

from lib.data import load_meta
from lib.data.prepared import ensure_prepared
from lib.data.vocab import CHAR_VOCAB_GUESS, GPT2_BPE_VOCAB, configured_vocab


def prepared_vocab(run) -> int:
    return int(load_meta(ensure_prepared(run.data, log=lambda _: None))["vocab_size"])


def test_gpt2_bpe_has_50257_tokens(tiny_run):
    assert configured_vocab(tiny_run(DATA_TOKENIZER_GPT2="y").data) == 50257 == GPT2_BPE_VOCAB


def test_a_trained_bpe_is_its_configured_size_until_its_corpus_tells(tiny_run):
    run = tiny_run(DATA_TOKENIZER_BPE="y", DATA_BPE_VOCAB_SIZE="3000")
    assert configured_vocab(run.data) == 3000
    # the tiny corpus runs out of merges: the trainer builds the model with meta.json's size
    vocab = prepared_vocab(run)
    assert configured_vocab(run.data) == vocab and 256 < vocab < 3000


def test_characters_are_the_prepared_corpus_else_the_stand_in(tiny_run):
    run = tiny_run()
    assert configured_vocab(run.data) == CHAR_VOCAB_GUESS == 256
    assert configured_vocab(run.data, unknown=GPT2_BPE_VOCAB) == 50257  # the config check's
    vocab = prepared_vocab(run)
    assert 2 < vocab < 256
    assert configured_vocab(run.data) == vocab == configured_vocab(run.data, unknown=GPT2_BPE_VOCAB)
