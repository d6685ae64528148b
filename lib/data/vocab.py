"""The vocabulary size a run's model is built with (before any GPT2_PAD_VOCAB
padding), the one source for the config check, `make estimate` and `make bench`.

A prepared dataset's meta.json is what the trainer builds the model with, so it
comes first: a trained BPE can stop short of DATA_BPE_VOCAB_SIZE when its corpus
runs out. Before preparing, the configuration tells: GPT-2's BPE has 50257
tokens, a trained BPE its DATA_BPE_VOCAB_SIZE; a character vocabulary is known
only from the prepared corpus, so the caller says what stands in for it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lib.data.meta import is_prepared, load_meta
from lib.data.prepared import data_dir

if TYPE_CHECKING:
    from lib.config.symbols import Data

GPT2_BPE_VOCAB = 50257
# Stands in for a character vocabulary not prepared yet: one id per byte value,
# more than the characters of most corpora (shakespeare: 65).
CHAR_VOCAB_GUESS = 256


def configured_vocab(d: Data, unknown: int = CHAR_VOCAB_GUESS) -> int:
    """The prepared dataset's vocabulary, else the configured tokenizer's; `unknown`
    for a character vocabulary whose corpus is not prepared yet."""
    folder = data_dir(d)
    if is_prepared(folder):
        return int(load_meta(folder)["vocab_size"])
    if d.DATA_TOKENIZER == "gpt2":
        return GPT2_BPE_VOCAB
    if d.DATA_TOKENIZER == "bpe":
        return d.DATA_BPE_VOCAB_SIZE
    return unknown
