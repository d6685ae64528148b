"""The model family's own checks (n_embd % n_head, a pretrained folder's shape
and vocabulary, ...) run when a configuration is loaded, not first when the
model is built; registered with lib/config/rules.py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lib.config.rules import rule
from lib.data.vocab import GPT2_BPE_VOCAB, configured_vocab
from lib.model import registry

if TYPE_CHECKING:
    from lib.config.run_config import RunConfig


@rule
def check_family(run: RunConfig) -> list[str]:
    """The family's config class checks its fields, with the tokenizer's real
    vocabulary where the configuration tells it. A character vocabulary not
    prepared yet is checked as GPT-2's, as the build checks it again once known."""
    vocab = configured_vocab(run.data, unknown=GPT2_BPE_VOCAB)
    try:
        registry.family(run.MODEL).from_run_config(run, vocab)
    except ValueError as err:
        return [str(err)]
    return []
