"""GPT2 forward pass, sizes, initialisation and the trainer interface."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from gpt2.config import GPT2Config
from gpt2.model import GPT2

# The tiny_model fixture (conftest.py): 2 layers, 4 heads, 64 wide.
VOCAB = 101
BLOCK = 32


def test_forward_with_targets_gives_all_logits_and_a_scalar_loss(tiny_model: GPT2) -> None:
    idx = torch.randint(0, VOCAB, (3, 20))
    logits, loss = tiny_model(idx, targets=idx)
    assert logits.shape == (3, 20, VOCAB)
    assert loss is not None and loss.shape == ()


def test_forward_without_targets_gives_only_last_position(tiny_model: GPT2) -> None:
    idx = torch.randint(0, VOCAB, (3, 20))
    logits, loss = tiny_model(idx)
    assert logits.shape == (3, 1, VOCAB)
    assert loss is None
    full, _ = tiny_model(idx, targets=idx)
    torch.testing.assert_close(logits[:, 0], full[:, -1], rtol=0, atol=1e-6)


def test_fresh_model_loss_is_near_uniform_guess(tiny_model: GPT2) -> None:
    torch.manual_seed(1)
    idx = torch.randint(0, VOCAB, (8, BLOCK))
    targets = torch.randint(0, VOCAB, (8, BLOCK))
    _, loss = tiny_model(idx, targets)
    assert abs(loss.item() - math.log(VOCAB)) < 0.3  # ln(101) = 4.615


def test_targets_of_minus_one_are_ignored(tiny_model: GPT2) -> None:
    idx = torch.randint(0, VOCAB, (2, 10))
    targets = torch.randint(0, VOCAB, (2, 10))
    masked = targets.clone()
    masked[:, 5:] = -1
    logits, loss = tiny_model(idx, masked)
    expected = nn.functional.cross_entropy(
        logits[:, :5].reshape(-1, VOCAB), targets[:, :5].reshape(-1)
    )
    torch.testing.assert_close(loss, expected)


def test_sequence_longer_than_block_size_names_both_lengths(tiny_model: GPT2) -> None:
    idx = torch.zeros(1, BLOCK + 1, dtype=torch.long)
    with pytest.raises(
        ValueError, match=rf"sequence length {BLOCK + 1} exceeds block_size {BLOCK}"
    ):
        tiny_model(idx)


def test_later_tokens_do_not_change_earlier_logits(tiny_model: GPT2) -> None:
    torch.manual_seed(2)
    idx = torch.randint(0, VOCAB, (2, BLOCK))
    t = 11
    changed = idx.clone()
    changed[:, t + 1 :] = torch.randint(0, VOCAB, (2, BLOCK - t - 1))
    before, _ = tiny_model(idx, targets=idx)
    after, _ = tiny_model(changed, targets=changed)
    torch.testing.assert_close(before[:, : t + 1], after[:, : t + 1], rtol=0, atol=1e-6)
    # The changed positions must actually matter, or the test proves nothing.
    assert (before[:, t + 1 :] - after[:, t + 1 :]).abs().max() > 1e-3


def test_gpt2_small_has_124439808_parameters() -> None:
    cfg = GPT2Config.from_preset("124m", vocab_size=50257, block_size=1024, bias=True)
    # Meta tensors have shapes but no storage: instant, and no memory used.
    with torch.device("meta"):
        model = GPT2(cfg)
    assert sum(p.numel() for p in model.parameters()) == 124_439_808
    assert model.num_params(non_embedding=False) == 124_439_808
    assert model.num_params(non_embedding=True) == 124_439_808 - 1024 * 768
    assert model.num_params() == 123_653_376


def test_lm_head_shares_storage_with_token_embedding(tiny_model: GPT2) -> None:
    assert tiny_model.lm_head.weight is tiny_model.transformer.wte.weight


def test_without_bias_linears_and_layernorms_have_no_bias() -> None:
    model = GPT2(
        GPT2Config(vocab_size=VOCAB, block_size=BLOCK, n_layer=2, n_head=4, n_embd=64, bias=False)
    )
    names = [n for n, _ in model.named_parameters()]
    assert not any(n.endswith(".bias") for n in names)
    # wte 101*64 + wpe 32*64 + 2 blocks * (2*64 + 12*64*64) + ln_f 64
    assert model.num_params(non_embedding=False) == 6464 + 2048 + 2 * 49280 + 64


def test_state_dict_uses_hugging_face_gpt2_names(tiny_model: GPT2) -> None:
    keys = set(tiny_model.state_dict())
    for suffix in ("ln_1", "attn.c_attn", "attn.c_proj", "ln_2", "mlp.c_fc", "mlp.c_proj"):
        assert f"transformer.h.1.{suffix}.weight" in keys
        assert f"transformer.h.1.{suffix}.bias" in keys
    expected_top = {
        "transformer.wte.weight",
        "transformer.wpe.weight",
        "transformer.ln_f.weight",
        "transformer.ln_f.bias",
        "lm_head.weight",
    }
    assert expected_top <= keys
    assert tiny_model.state_dict()["transformer.h.0.attn.c_attn.weight"].shape == (192, 64)


def test_residual_projections_start_with_depth_scaled_std() -> None:
    torch.manual_seed(3)
    cfg = GPT2Config(vocab_size=VOCAB, block_size=BLOCK, n_layer=8, n_head=4, n_embd=256)
    model = GPT2(cfg)
    scaled = 0.02 / math.sqrt(2 * 8)  # 0.005
    for block in model.transformer.h:
        # 65k and 262k samples: the sample std is within ~1 % of the truth.
        assert block.attn.c_proj.weight.std().item() == pytest.approx(scaled, rel=0.05)
        assert block.mlp.c_proj.weight.std().item() == pytest.approx(scaled, rel=0.05)
        assert block.mlp.c_fc.weight.std().item() == pytest.approx(0.02, rel=0.05)
        assert block.attn.c_attn.weight.std().item() == pytest.approx(0.02, rel=0.05)
        assert torch.count_nonzero(block.attn.c_attn.bias) == 0
    assert model.transformer.wte.weight.std().item() == pytest.approx(0.02, rel=0.05)
    assert model.transformer.wpe.weight.std().item() == pytest.approx(0.02, rel=0.05)
    assert torch.all(model.transformer.ln_f.weight == 1)


def test_param_groups_decay_only_matrices_and_embeddings(tiny_model: GPT2) -> None:
    decay, no_decay = tiny_model.param_groups(weight_decay=0.1)
    assert decay["weight_decay"] == 0.1 and no_decay["weight_decay"] == 0.0
    assert all(p.dim() >= 2 for p in decay["params"])
    assert all(p.dim() == 1 for p in no_decay["params"])
    layer_norms = {f"transformer.h.{i}.{ln}.weight" for i in range(2) for ln in ("ln_1", "ln_2")}
    layer_norms.add("transformer.ln_f.weight")
    biases = {n for n, _ in tiny_model.named_parameters() if n.endswith(".bias")}
    assert set(no_decay["names"]) == layer_norms | biases
    assert len(no_decay["names"]) == 5 + 13  # 5 LayerNorms; 4 Linears * 2 blocks + 5 LN biases
    assert "transformer.wte.weight" in decay["names"] and "lm_head.weight" not in decay["names"]
    counted = sum(p.numel() for g in (decay, no_decay) for p in g["params"])
    assert counted == tiny_model.num_params(non_embedding=False)
    ids = [id(p) for g in (decay, no_decay) for p in g["params"]]
    assert len(ids) == len(set(ids)) == len(list(tiny_model.parameters()))


def test_knlps_decay_rule_skips_biases_and_embeddings_and_decays_gains(tiny_model: GPT2) -> None:
    # WEIGHT_DECAY_PARAMS_KNLP: knlp's lib/optimizers.py groups on its own GPT-2
    decay, no_decay = tiny_model.param_groups(weight_decay=0.1, rule="knlp")
    biases = {n for n, _ in tiny_model.named_parameters() if n.endswith(".bias")}
    tables = {"transformer.wte.weight", "transformer.wpe.weight"}  # the tied head is wte
    assert set(no_decay["names"]) == biases | tables
    assert "transformer.ln_f.weight" in decay["names"]  # 1-D, decayed as knlp does
    assert "transformer.h.0.attn.c_attn.weight" in decay["names"]
    ids = [id(p) for g in (decay, no_decay) for p in g["params"]]
    assert len(ids) == len(set(ids)) == len(list(tiny_model.parameters()))


def test_param_groups_are_accepted_by_adamw(tiny_model: GPT2) -> None:
    opt = torch.optim.AdamW(tiny_model.param_groups(weight_decay=0.1), lr=1e-3)
    assert [g["weight_decay"] for g in opt.param_groups] == [0.1, 0.0]


def test_prunable_lists_the_four_block_linears_per_layer(tiny_model: GPT2) -> None:
    pairs = tiny_model.prunable()
    expected = [
        f"transformer.h.{i}.{name}.weight"
        for i in range(2)
        for name in ("attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj")
    ]
    assert [name for name, _ in pairs] == expected
    params = dict(tiny_model.named_parameters())
    for name, weight in pairs:
        assert weight is params[name]
    assert [tuple(w.shape) for _, w in pairs[:4]] == [(192, 64), (64, 64), (256, 64), (64, 256)]


def test_flops_per_token_matches_hand_count(tiny_model: GPT2) -> None:
    # Non-embedding parameters of the 2-layer, 4-head, 64-wide model:
    # wte 101*64 = 6464; per block ln 2*128, c_attn 64*192+192 = 12480,
    # attn c_proj 64*64+64 = 4160, c_fc 64*256+256 = 16640,
    # mlp c_proj 256*64+64 = 16448, so 49984; ln_f 128.
    n = 6464 + 2 * 49984 + 128
    assert tiny_model.num_params(non_embedding=True) == n == 106_560
    # 6N + 12 * layers * heads * head_dim * T with T = 32.
    assert tiny_model.flops_per_token(32) == 6 * 106_560 + 12 * 2 * 4 * 16 * 32 == 688_512


def test_aux_metrics_is_empty_for_gpt2(tiny_model: GPT2) -> None:
    assert tiny_model.aux_metrics() == {}
