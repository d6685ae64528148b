"""Sliding-window perplexity against a token-by-token hand computation."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from gpt2.config import GPT2Config
from gpt2.model import GPT2
from lib.eval import perplexity
from lib.eval.perplexity import plan_windows, sliding_window_nll

VOCAB, BLOCK = 37, 8


@pytest.fixture(scope="module")
def model() -> GPT2:
    torch.manual_seed(0)
    m = GPT2(GPT2Config(vocab_size=VOCAB, block_size=BLOCK, n_layer=2, n_head=2, n_embd=16))
    for p in m.parameters():  # larger weights than GPT-2's init: confident, varied predictions
        p.data.normal_(0, 0.3)
    return m.eval()


def hand_nll(model: GPT2, tokens: torch.Tensor, block: int, stride: int) -> float:
    """Each token j >= 1 scored alone: -log p(t_j | t_b .. t_{j-1}), where b is the
    start of the first window whose inputs reach j - 1 (window starts are 0,
    stride, 2 stride, ... and a window holds block inputs)."""
    total = 0.0
    for j in range(1, len(tokens)):
        begin = 0
        while j - 1 >= begin + block:  # input j - 1 lies beyond this window
            begin += stride
        logits, _ = model(tokens[begin:j].unsqueeze(0))  # last position only
        total -= F.log_softmax(logits[0, -1].double(), -1)[tokens[j]].item()
    return total


@pytest.mark.parametrize("stride", [1, 3, BLOCK])
@pytest.mark.parametrize("n", [2, 8, 9, 30])
def test_sliding_window_matches_hand_computation(model, stride, n):
    tokens = torch.randint(0, VOCAB, (n,), generator=torch.Generator().manual_seed(n))
    result = sliding_window_nll(model, tokens, BLOCK, stride, batch_size=4)
    expected = hand_nll(model, tokens, BLOCK, stride)
    assert result.tokens == n - 1
    assert result.nll == pytest.approx(expected, rel=1e-5)
    assert result.perplexity == pytest.approx(math.exp(expected / (n - 1)), rel=1e-5)


def test_stride_one_gives_every_token_a_full_context(model):
    tokens = torch.randint(0, VOCAB, (20,), generator=torch.Generator().manual_seed(1))
    by_hand = 0.0
    for j in range(1, 20):
        logits, _ = model(tokens[max(0, j - BLOCK) : j].unsqueeze(0))
        by_hand -= F.log_softmax(logits[0, -1].double(), -1)[tokens[j]].item()
    assert sliding_window_nll(model, tokens, BLOCK, 1).nll == pytest.approx(by_hand, rel=1e-5)


def test_batch_size_does_not_change_the_result(model):
    tokens = torch.randint(0, VOCAB, (41,), generator=torch.Generator().manual_seed(2))
    one = sliding_window_nll(model, tokens, BLOCK, 3, batch_size=1)
    many = sliding_window_nll(model, tokens, BLOCK, 3, batch_size=16)
    assert one.windows == many.windows == 12 and one.nll == pytest.approx(many.nll, rel=1e-6)


class Uniform(nn.Module):
    """Equal logits everywhere: perplexity is exactly the vocabulary size."""

    def forward(self, idx, targets=None):
        return torch.zeros(*idx.shape, 50), None


def test_uniform_model_has_perplexity_equal_to_vocabulary():
    result = sliding_window_nll(Uniform(), torch.arange(100) % 50, 16, 5)
    assert result.perplexity == pytest.approx(50.0, rel=1e-6)
    assert result.tokens == 99 and result.as_dict()["loss"] == pytest.approx(math.log(50))


@pytest.mark.parametrize("n,block,stride", [(2, 8, 8), (100, 16, 5), (17, 16, 16), (1000, 64, 32)])
def test_windows_score_each_token_once_with_enough_context(n, block, stride):
    scored = []
    for w in plan_windows(n, block, stride):
        assert w.end - w.begin <= block and w.begin < w.first <= w.end
        targets = list(range(w.first, w.end + 1))
        assert all(t - w.begin >= min(t, block - stride + 1) for t in targets)
        scored += targets
    assert scored == list(range(1, n))


def test_invalid_arguments_are_clear_errors():
    with pytest.raises(ValueError, match="stride 9 is invalid"):
        plan_windows(100, 8, 9)
    with pytest.raises(ValueError, match="stride 0 is invalid"):
        plan_windows(100, 8, 0)
    with pytest.raises(ValueError, match="at least 2"):
        plan_windows(1, 8, 4)


def test_blocks_run_once_per_window_and_the_head_only_on_scored_tokens(model, monkeypatch):
    """One pass per window through the blocks (batched), and the LM head over the
    n - 1 scored positions only, a bounded number of rows at a time."""
    n, stride, batch = 60, 3, 4
    tokens = torch.randint(0, VOCAB, (n,), generator=torch.Generator().manual_seed(5))
    windows = plan_windows(n, BLOCK, stride)
    passes, fed, head_rows = [], [], []
    hidden = model.hidden_states

    def counted(idx):
        passes.append(idx.shape[0])
        fed.append(idx.numel())
        return hidden(idx)

    monkeypatch.setattr(model, "hidden_states", counted)
    monkeypatch.setitem(perplexity.LOGITS_PER_CHUNK, "cpu", 5 * VOCAB)  # 5 rows of logits
    hook = model.lm_head.register_forward_hook(lambda m, i, o: head_rows.append(o.shape[0]))
    try:
        result = sliding_window_nll(model, tokens, BLOCK, stride, batch_size=batch)
    finally:
        hook.remove()
    assert len(windows) == 18 and passes == [4, 4, 4, 4, 2]  # all 18 windows are full
    assert sum(passes) == len(windows) and sum(fed) == sum(w.end - w.begin for w in windows)
    assert sum(head_rows) == n - 1 and max(head_rows) == 5
    assert result.nll == pytest.approx(hand_nll(model, tokens, BLOCK, stride), rel=1e-5)


class ForwardOnly(nn.Module):
    """A family without hidden_states: scored through forward(idx, targets)."""

    def __init__(self, inner: nn.Module):
        super().__init__()
        self.inner = inner

    def forward(self, idx, targets=None):
        return self.inner(idx, targets)


def test_a_model_without_hidden_states_gets_the_same_result(model):
    tokens = torch.randint(0, VOCAB, (45,), generator=torch.Generator().manual_seed(6))
    direct = sliding_window_nll(model, tokens, BLOCK, 5, batch_size=3)
    through_forward = sliding_window_nll(ForwardOnly(model).eval(), tokens, BLOCK, 5, batch_size=3)
    assert through_forward.nll == pytest.approx(direct.nll, rel=1e-6)
    assert through_forward.nll == pytest.approx(hand_nll(model, tokens, BLOCK, 5), rel=1e-5)


def test_progress_bar_counts_the_scored_tokens(model, capsys):
    tokens = torch.randint(0, VOCAB, (30,), generator=torch.Generator().manual_seed(7))
    sliding_window_nll(model, tokens, BLOCK, 4, progress="eval val")
    err = capsys.readouterr().err
    assert "eval val" in err and "100%" in err and "29.0/29.0" in err  # unit_scale: 153k/153k
    sliding_window_nll(model, tokens, BLOCK, 4)  # a library call draws none
    assert capsys.readouterr().err == ""


def test_hamt_hidden_states_give_its_forward_s_perplexity():
    from hamt.config import HAMTConfig
    from hamt.model import HAMT

    torch.manual_seed(0)
    hamt = HAMT(
        HAMTConfig(vocab_size=VOCAB, block_size=BLOCK, n_layer=2, n_head=2, n_embd=16, num_slots=4)
    ).eval()
    tokens = torch.randint(0, VOCAB, (40,), generator=torch.Generator().manual_seed(8))
    direct = sliding_window_nll(hamt, tokens, BLOCK, 3, batch_size=4)
    through_forward = sliding_window_nll(ForwardOnly(hamt).eval(), tokens, BLOCK, 3, batch_size=4)
    assert direct.nll == pytest.approx(through_forward.nll, rel=1e-6)
