"""LAMBADA-style last-word accuracy with a model whose predictions are known."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from lib.data.tokenizers import CharTokenizer
from lib.eval.lambada import encode_passages, last_word_accuracy, split_last_word

TOK = CharTokenizer(list(" abcdefgh"))


class NextTable(nn.Module):
    """Predicts next[id] with probability e^4 / (e^4 + V - 1), every other id equally."""

    def __init__(self, table: dict[str, str]):
        super().__init__()
        ids = torch.arange(TOK.vocab_size)
        for a, b in table.items():
            ids[TOK.encode(a)[0]] = TOK.encode(b)[0]
        self.register_buffer("next", ids)

    def forward(self, idx, targets=None):
        return 4.0 * nn.functional.one_hot(self.next[idx], TOK.vocab_size).float(), None


# a->b, b->' ', ' '->c, c->d: "ab cd" is predicted perfectly after "ab".
MODEL = NextTable({"a": "b", "b": " ", " ": "c", "c": "d", "d": "e"})
P_RIGHT = math.exp(4) / (math.exp(4) + TOK.vocab_size - 1)
P_WRONG = 1 / (math.exp(4) + TOK.vocab_size - 1)


def test_split_keeps_the_space_with_the_target():
    assert split_last_word("  the cat sat \n") == ("the cat", " sat")
    with pytest.raises(ValueError, match="no context"):
        split_last_word("alone")


def test_accuracy_counts_passages_whose_every_target_token_is_greedy():
    texts = ["ab cd", "ab ce", "hab cde", "ab ac"]
    # "ab cd": ' ', c, d all right. "ab ce": e after c is wrong. "hab cde": right.
    # "ab ac": a after ' ' is wrong, c after a is wrong.
    for batch in (1, 3, 8):
        out = last_word_accuracy(MODEL, TOK, texts, block=16, batch_size=batch)
        assert out["correct"] == 2 and out["examples"] == 4 and out["accuracy"] == 0.5
        assert out["target_tokens"] == 3 + 3 + 4 + 3
        nll = -(
            3 * math.log(P_RIGHT)
            + (2 * math.log(P_RIGHT) + math.log(P_WRONG))
            + 4 * math.log(P_RIGHT)
            + (math.log(P_RIGHT) + 2 * math.log(P_WRONG))
        )
        assert out["perplexity"] == pytest.approx(math.exp(nll / 4), rel=1e-6)


def test_long_contexts_keep_their_end():
    ((ids, n_target),) = encode_passages(["hhhhhhhhhh ab"], TOK, block=4)
    assert TOK.decode(ids) == "hh ab" and n_target == 3
    out = last_word_accuracy(MODEL, TOK, ["gggggggggggab cd"], block=4)
    assert out["correct"] == 1
