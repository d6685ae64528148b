"""The vocabulary the configuration tells (lib/data/vocab.py), which the
family's config check uses instead of assuming GPT-2's."""
from __future__ import annotations

from lib.data import load_meta
from lib.data.prepared import ensure_prepared
from lib.data.vocab import configured_vocab


def test_vocabulary_from_the_tokenizer_or_the_prepared_data(tiny_run):
    assert configured_vocab(tiny_run(DATA_TOKENIZER_GPT2="y")) == 50257
    assert configured_vocab(tiny_run(DATA_TOKENIZER_BPE="y", DATA_BPE_VOCAB_SIZE="3000")) == 3000
    run = tiny_run()  # characters: unknown until the corpus is prepared
    assert configured_vocab(run) is None
    vocab = load_meta(ensure_prepared(run, log=lambda _: None))["vocab_size"]
    assert configured_vocab(run) == vocab and 2 < vocab < 256
