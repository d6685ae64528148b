"""The chunked LM-head cross-entropy against the plain one: loss and gradients
through the tied head, padded vocabulary, ignored targets, bf16 autocast,
every family, and a short training run (lib/model/fused_loss.py)."""

from __future__ import annotations

import json

import pytest
import torch

from lib.model.fused_loss import (
    IGNORE_INDEX,
    chunk_rows,
    chunked_linear_cross_entropy,
    liger_available,
    plain_linear_cross_entropy,
    resolve_loss_impl,
)
from lib.train.naming import create_run_dir
from lib.train.trainer import Trainer
from tests.lib.stops import train_until


def _inputs(rows=300, width=32, vocab=136, real_vocab=120, seed=0):
    """Hidden states, a head weight whose last rows are padding (never targets,
    as GPT2_PAD_VOCAB pads the vocabulary), and targets with ignored (-1) rows."""
    gen = torch.Generator().manual_seed(seed)
    hidden = torch.randn(rows, width, generator=gen)
    weight = torch.randn(vocab, width, generator=gen) * 0.2
    targets = torch.randint(0, real_vocab, (rows,), generator=gen)
    targets[::7] = -1
    return hidden, weight, targets


def _loss_and_grads(fn, hidden, weight, targets, scale=1.0, autocast=None):
    h, w = hidden.clone().requires_grad_(), weight.clone().requires_grad_()
    with torch.autocast("cpu", dtype=autocast, enabled=autocast is not None):
        loss = fn(h, w, targets)
    (loss * scale).backward()
    return loss.detach(), h.grad, w.grad


@pytest.mark.parametrize("rows", [1, 64, 97, 300, 1000])
def test_chunked_equals_plain_in_fp32(rows):
    hidden, weight, targets = _inputs()
    plain = _loss_and_grads(plain_linear_cross_entropy, hidden, weight, targets, scale=3.0)
    chunked = _loss_and_grads(
        lambda h, w, t: chunked_linear_cross_entropy(h, w, t, rows=rows),
        hidden,
        weight,
        targets,
        scale=3.0,
    )
    for a, b in zip(plain, chunked):
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-7)
    # Padding rows are in the softmax (they get a gradient pushing them down), as plain.
    assert (chunked[2][120:] > 0).any()


def test_chunked_equals_plain_under_bf16_autocast():
    hidden, weight, targets = _inputs()
    plain = _loss_and_grads(
        plain_linear_cross_entropy, hidden, weight, targets, autocast=torch.bfloat16
    )
    chunked = _loss_and_grads(
        lambda h, w, t: chunked_linear_cross_entropy(h, w, t, rows=64),
        hidden,
        weight,
        targets,
        autocast=torch.bfloat16,
    )
    assert chunked[0].dtype == torch.float32 and chunked[1].dtype == torch.float32
    torch.testing.assert_close(chunked[0], plain[0], rtol=1e-4, atol=1e-4)
    for a, b in zip(plain[1:], chunked[1:]):
        # Plain rounds d(logits) to bf16 before its matmuls; chunked keeps fp32 sums.
        assert (b - a).abs().max() < 0.02 * a.abs().max()


def test_all_targets_ignored_gives_nan_as_plain():
    hidden, weight, targets = _inputs(rows=8)
    targets[:] = -1
    assert torch.isnan(chunked_linear_cross_entropy(hidden, weight, targets))
    assert torch.isnan(plain_linear_cross_entropy(hidden, weight, targets))


def test_without_grad_only_the_loss_is_computed():
    hidden, weight, targets = _inputs()
    with torch.no_grad():
        loss = chunked_linear_cross_entropy(hidden, weight, targets, rows=50)
    assert loss.item() == pytest.approx(
        plain_linear_cross_entropy(hidden, weight, targets).item(), rel=1e-6
    )


def test_chunk_rows_hold_about_as_many_logits_as_hidden_values():
    # GPT-2 124M, 16 x 1024 rows: ceil(50304 / 768) = 66 chunks -> 249 rows -> 256,
    # raised to the 1024-row floor (16 chunks of 1024 x 50304 logits).
    assert chunk_rows(16384, 768, 50304) == 1024
    assert chunk_rows(2**20, 768, 50304) == 16384  # 64 x 16384-token micro-batch: 66 chunks
    assert chunk_rows(768, 128, 65) == 768  # vocabulary narrower than the model: one chunk
    assert chunk_rows(5, 4, 1000) == 5


def test_on_a_cpu_a_chunk_holds_as_many_rows_as_the_model_is_wide_or_2_20_logits():
    # The embedded default (4 x 128, vocabulary 5,520, 12 x 64 rows): 2**20 / 5520 = 189
    # rows -> 256, 3 chunks.
    assert chunk_rows(768, 128, 5520, "cpu") == 256
    assert chunk_rows(768, 128, 50304, "cpu") == 128  # the width: 20 rows hold 2**20
    assert chunk_rows(2048, 768, 50304, "cpu") == 1024  # GPT-2 124M: 2 chunks
    assert chunk_rows(768, 100, 50304, "cpu") == 128  # a power of two at or above
    assert chunk_rows(768, 128, 80, "cpu") == 768  # a small vocabulary: one chunk
    assert chunk_rows(40, 128, 50304, "cpu") == 40  # fewer rows than a chunk: one
    # elsewhere the GPU rule, whatever the device is called
    assert chunk_rows(768, 128, 5520, "cuda") == chunk_rows(768, 128, 5520) == 768
    assert chunk_rows(768, 128, 5520, "mps") == 768


def test_the_cpu_chunks_give_plains_loss_and_gradients():
    """The default's shape on the CPU: several chunks (chunk_rows' choice), compared with
    the plain path in the same process."""
    torch.manual_seed(0)
    hidden = torch.randn(300, 16, requires_grad=True)
    weight = torch.randn(20000, 16, requires_grad=True)
    targets = torch.randint(0, 20000, (300,))
    targets[::7] = IGNORE_INDEX
    assert chunk_rows(300, 16, 20000, "cpu") == 64  # 5 chunks, the last of 44 rows
    loss = chunked_linear_cross_entropy(hidden, weight, targets)
    gh, gw = torch.autograd.grad(loss, (hidden, weight))
    ref = plain_linear_cross_entropy(hidden, weight, targets)
    rh, rw = torch.autograd.grad(ref, (hidden, weight))
    assert loss.item() == pytest.approx(ref.item(), rel=1e-6)
    torch.testing.assert_close(gh, rh, rtol=1e-5, atol=1e-7)
    torch.testing.assert_close(gw, rw, rtol=1e-5, atol=1e-7)


def test_resolve_loss_impl_refuses_what_cannot_run(monkeypatch):
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    assert resolve_loss_impl("plain", cpu)[0] == "plain"
    assert resolve_loss_impl("auto", cpu) == (
        "chunked",
        "auto: no CUDA device, the chunked torch implementation",
    )
    with pytest.raises(RuntimeError, match="needs a CUDA GPU"):
        resolve_loss_impl("liger", cpu)
    monkeypatch.setattr("lib.model.fused_loss.liger_available", lambda: False)
    with pytest.raises(RuntimeError, match="pip install liger-kernel"):
        resolve_loss_impl("liger", cuda)
    assert resolve_loss_impl("auto", cuda)[0] == "chunked"
    monkeypatch.setattr("lib.model.fused_loss.liger_available", lambda: True)
    assert resolve_loss_impl("auto", cuda)[0] == "liger"


def _tiny(family: str):
    if family == "gpt2":
        from gpt2.config import GPT2Config
        from gpt2.model import GPT2

        return GPT2(
            GPT2Config(
                n_layer=2,
                n_head=2,
                n_embd=32,
                block_size=16,
                vocab_size=72,
                dropout=0.0,
                bias=False,
            )
        )
    from hamt.config import HAMTConfig
    from hamt.model import HAMT

    return HAMT(HAMTConfig(n_layer=2, n_embd=32, block_size=16, vocab_size=72, dropout=0.0))


@pytest.mark.parametrize("family", ["gpt2", "hamt"])
def test_every_family_gets_the_same_loss_and_gradients(family):
    torch.manual_seed(0)
    model = _tiny(family)
    x = torch.randint(0, 65, (3, 16))
    y = torch.randint(0, 65, (3, 16))
    y[0, :4] = -1
    grads = {}
    for impl in ("plain", "chunked"):
        model.use_head_loss(impl)
        model.zero_grad()
        torch.manual_seed(1)  # HAMT's retrieval loss draws random lags
        logits, loss = model(x, y)
        loss.backward()
        grads[impl] = (loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters()})
        assert logits.numel() == (0 if impl == "chunked" else 3 * 16 * 72)
    torch.testing.assert_close(grads["chunked"][0], grads["plain"][0], rtol=1e-5, atol=1e-6)
    for name, grad in grads["plain"][1].items():  # the tied wte/lm_head weight included
        torch.testing.assert_close(
            grads["chunked"][1][name],
            grad,
            rtol=1e-4,
            atol=1e-6,
            msg=lambda m, name=name: f"{name}: {m}",
        )
    model.eval()  # evaluation always gets the logits
    logits, _ = model(x, y)
    assert logits.shape == (3, 16, 72)


def test_training_with_the_chunked_loss_matches_plain(tiny_run):
    summaries = {}
    for impl in ("PLAIN", "CHUNKED"):
        run = tiny_run(
            GPT2_MAX_ITERS=8,
            GPT2_EVAL_INTERVAL=4,
            RUN_NAME=impl.lower(),
            GPT2_PAD_VOCAB="y",
            **{f"TRAIN_LOSS_IMPL_{impl}": "y"},
        )
        run_dir = create_run_dir(run)
        trainer = Trainer(run, run_dir, log=lambda _: None)
        summaries[impl] = train_until(trainer, None)
        speed = json.loads((run_dir / "metrics.json").read_text())["speed"]
        assert speed["loss_impl"] == impl.lower()
    plain, chunked = summaries["PLAIN"], summaries["CHUNKED"]
    assert chunked["train_loss"]["values"] == pytest.approx(plain["train_loss"]["values"], rel=1e-4)
    assert chunked["val_loss"]["values"] == pytest.approx(plain["val_loss"]["values"], rel=1e-4)
    assert plain["train_loss"]["values"][-1] < plain["train_loss"]["values"][0]


@pytest.mark.gpu
@pytest.mark.skipif(
    not torch.cuda.is_available() or not liger_available(), reason="needs CUDA and liger-kernel"
)
@pytest.mark.parametrize("impl", ["chunked", "liger"])
def test_fused_losses_match_plain_on_gpu(impl):
    from lib.model.fused_loss import head_loss

    hidden, weight, targets = (
        t.cuda() for t in _inputs(rows=2048, width=128, vocab=1024, real_vocab=1000)
    )
    fn = head_loss(impl)
    plain = _loss_and_grads(plain_linear_cross_entropy, hidden, weight, targets, autocast=None)
    fused = _loss_and_grads(fn, hidden, weight, targets, autocast=None)
    torch.testing.assert_close(fused[0], plain[0], rtol=1e-4, atol=1e-4)
    for a, b in zip(plain[1:], fused[1:]):
        assert (b - a).abs().max() < 1e-3 * a.abs().max()
