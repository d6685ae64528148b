"""The vocabulary size the configured tokenizer gives (before any padding),
known from the configuration alone where it can be: GPT-2's BPE has 50257
tokens, a trained BPE its DATA_BPE_VOCAB_SIZE; a character vocabulary is the
prepared dataset's, unknown (None) until the data is prepared."""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from lib.config.run_config import RunConfig

GPT2_BPE_VOCAB = 50257


def configured_vocab(run: RunConfig) -> int | None:
    """The tokenizer's vocabulary size, or None when only preparing the data tells."""
    if run.DATA_TOKENIZER == "gpt2":
        return GPT2_BPE_VOCAB
    if run.DATA_TOKENIZER == "bpe":
        assert run.DATA_BPE_VOCAB_SIZE is not None  # visible whenever DATA_TOKENIZER_BPE
        return run.DATA_BPE_VOCAB_SIZE
    from lib.data.corpus import is_prepared, load_meta  # numpy: only for a character vocabulary
    from lib.data.prepared import data_dir

    folder = data_dir(run)
    return int(load_meta(folder)["vocab_size"]) if is_prepared(folder) else None
