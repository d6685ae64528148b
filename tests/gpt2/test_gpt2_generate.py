"""Key/value cache and sampling."""

from __future__ import annotations

import pytest
import torch

from gpt2.attention import KVCache, causal_mask
from gpt2.model import GPT2

# The tiny_model fixture (conftest.py): 2 layers, 4 heads, 64 wide.
VOCAB = 101
BLOCK = 32


def test_mask_after_cache_lets_each_new_token_see_the_past_and_earlier_new_ones() -> None:
    mask, is_causal = causal_mask(n_new=3, n_past=2, device=torch.device("cpu"))
    assert not is_causal
    assert mask.int().tolist() == [
        [1, 1, 1, 0, 0],
        [1, 1, 1, 1, 0],
        [1, 1, 1, 1, 1],
    ]


def test_mask_needs_nothing_for_prefill_or_one_new_token() -> None:
    cpu = torch.device("cpu")
    assert causal_mask(n_new=5, n_past=0, device=cpu) == (None, True)
    assert causal_mask(n_new=1, n_past=7, device=cpu) == (None, False)


def test_cache_position_counts_appended_tokens() -> None:
    cache = KVCache()
    assert cache.pos == 0
    cache.append(torch.zeros(2, 4, 3, 16), torch.zeros(2, 4, 3, 16))
    k, v = cache.append(torch.ones(2, 4, 1, 16), torch.ones(2, 4, 1, 16))
    assert cache.pos == 4
    assert k.shape == v.shape == (2, 4, 4, 16)
    assert k[:, :, 3].min() == 1 and k[:, :, :3].max() == 0


def test_incremental_logits_match_a_full_forward(tiny_model: GPT2) -> None:
    torch.manual_seed(4)
    idx = torch.randint(0, VOCAB, (2, 20))
    full, _ = tiny_model(idx, targets=idx)
    caches = tiny_model.new_cache()
    # A prompt, then single tokens, then a chunk of three after a non-empty
    # cache: the three ways attention is masked.
    pieces = [idx[:, :8]] + [idx[:, t : t + 1] for t in range(8, 17)] + [idx[:, 17:20]]
    with torch.no_grad():
        stepped = torch.cat([tiny_model.forward_cached(p, caches) for p in pieces], dim=1)
    assert caches[0].pos == caches[1].pos == 20
    torch.testing.assert_close(stepped, full, rtol=0, atol=1e-5)


def test_cache_cannot_run_past_block_size(tiny_model: GPT2) -> None:
    caches = tiny_model.new_cache()
    tiny_model.forward_cached(torch.zeros(1, BLOCK, dtype=torch.long), caches)
    with pytest.raises(
        ValueError, match=rf"sequence length {BLOCK + 1} exceeds block_size {BLOCK}"
    ):
        tiny_model.forward_cached(torch.zeros(1, 1, dtype=torch.long), caches)


@pytest.mark.parametrize("new_tokens", [10, 40])  # 40 runs past the 32-token block
def test_greedy_generation_is_the_same_with_and_without_cache(
    tiny_model: GPT2, new_tokens: int
) -> None:
    torch.manual_seed(5)
    prompt = torch.randint(0, VOCAB, (2, 5))
    cached = tiny_model.generate(prompt, new_tokens, temperature=0, use_cache=True)
    uncached = tiny_model.generate(prompt, new_tokens, temperature=0, use_cache=False)
    assert cached.shape == (2, 5 + new_tokens)
    assert torch.equal(cached[:, :5], prompt)
    assert torch.equal(cached, uncached)


def test_greedy_generation_picks_the_forward_argmax(tiny_model: GPT2) -> None:
    prompt = torch.randint(0, VOCAB, (1, 6))
    logits, _ = tiny_model(prompt)
    out = tiny_model.generate(prompt, 1, temperature=0)
    assert out[0, -1].item() == logits[0, -1].argmax().item()


def test_top_1_sampling_equals_greedy(tiny_model: GPT2) -> None:
    prompt = torch.randint(0, VOCAB, (3, 4))
    greedy = tiny_model.generate(prompt, 8, temperature=0)
    top1 = tiny_model.generate(prompt, 8, temperature=0.7, top_k=1)
    assert torch.equal(greedy, top1)


def test_sampling_with_top_k_only_draws_from_the_k_most_likely(tiny_model: GPT2) -> None:
    torch.manual_seed(6)
    prompt = torch.randint(0, VOCAB, (256, 3))
    logits, _ = tiny_model(prompt)
    allowed = torch.topk(logits[:, -1], 5).indices
    drawn = tiny_model.generate(prompt, 1, temperature=5.0, top_k=5)[:, -1:]
    assert torch.all((drawn == allowed).any(dim=1))
    assert len(drawn.unique()) > 5  # rows differ, so draws spread over tokens


def test_generation_restores_training_mode(tiny_model: GPT2) -> None:
    tiny_model.train()
    tiny_model.generate(torch.zeros(1, 1, dtype=torch.long), 2)
    assert tiny_model.training


def test_negative_temperature_is_rejected(tiny_model: GPT2) -> None:
    with pytest.raises(ValueError, match=r"temperature=-1"):
        tiny_model.generate(torch.zeros(1, 1, dtype=torch.long), 1, temperature=-1)
