"""Pruner(movement_score="knlp") against a float64 transcription, written here, of
knlp's movement pruning as its GPT-2 trainer runs it (mcgrof/knlp 041ec5f2,
lib/movement_pruning.py, gpt2/trainers/vanilla.py): masks step by step."""

from __future__ import annotations

import io

import pytest
import torch
from torch import nn

from lib.prune.pruner import Pruner
from lib.prune.schedule import mask_update_steps

WARMUP, RAMP_END, TARGET, ITERS = 3, 12, 0.6, 20  # knlp's numbering: 0-based iterations


def _model(seed: int = 0) -> nn.Sequential:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3)).double()


def _batches():
    g = torch.Generator().manual_seed(1)
    return [
        (
            torch.randn(16, 6, generator=g, dtype=torch.float64),
            torch.randint(0, 3, (16,), generator=g),
        )
        for _ in range(ITERS)
    ]


def _loss(model, x, y):
    return nn.functional.cross_entropy(model(x), y)


def knlp_masks() -> tuple[list[list[torch.Tensor]], list[list[torch.Tensor]]]:
    """knlp's loop, in float64: after iteration i's optimizer step, zero the weights by
    the masks; then update_masks(i): sparsity 0 while i < warmup (and at warmup: no
    change), linear to the target at ramp_end, the target after; scores w (w - w0)
    over every nn.Linear; k = int(s * n); every score <= the k-th smallest pruned;
    then zero the weights again. Gradients and moments are never masked."""
    model = _model()
    linears = [m for m in model if isinstance(m, nn.Linear)]
    w0 = [m.weight.detach().clone() for m in linears]
    masks = [torch.ones_like(w) for w in w0]
    opt = torch.optim.AdamW(model.parameters(), lr=0.05, weight_decay=0.0)
    history, weights = [], []
    for i, (x, y) in enumerate(_batches()):
        _loss(model, x, y).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        with torch.no_grad():
            for m, mask in zip(linears, masks):
                m.weight.mul_(mask)
            if i < WARMUP:
                s = 0.0
            elif i >= RAMP_END:
                s = TARGET
            else:
                s = TARGET * (i - WARMUP) / (RAMP_END - WARMUP)
            if s != 0.0:
                scores = [m.weight * (m.weight - a) for m, a in zip(linears, w0)]
                flat = sorted(float(v) for sc in scores for v in sc.flatten())
                k = int(s * len(flat))
                if k > 0:
                    masks = [(sc > flat[k - 1]).double() for sc in scores]
                for m, mask in zip(linears, masks):
                    m.weight.mul_(mask)
        history.append([mask.bool() for mask in masks])
        weights.append([m.weight.detach().clone() for m in linears])
    return history, weights


def our_masks(stop: int | None = None, resume: bytes | None = None):
    """This project's pruner on the same run: knlp's iteration i is step i + 1, so
    warmup and ramp end are knlp's + 1, frequency 1, the linear schedule."""
    model = _model()
    linears = [m for m in model if isinstance(m, nn.Linear)]
    opt = torch.optim.AdamW(model.parameters(), lr=0.05, weight_decay=0.0)
    pruner = Pruner(
        [(f"{i}.weight", m.weight) for i, m in enumerate(linears)],
        method="movement",
        movement_score="knlp",
        target=TARGET,
        warmup=WARMUP + 1,
        ramp_end=RAMP_END + 1,
        frequency=1,
        schedule="linear",
        scope="global",
        optimizer=opt,
    )
    history, weights = [], []
    for step, (x, y) in enumerate(_batches(), start=1):
        if stop is not None and step > stop:
            break
        _loss(model, x, y).backward()
        pruner.before_step(step)
        opt.step()
        opt.zero_grad(set_to_none=True)
        pruner.after_step(step)
        history.append([m.clone() for m in pruner.masks])
        weights.append([m.weight.detach().clone() for m in linears])
    return history, weights, pruner


def test_masks_match_knlp_step_by_step_and_pruned_weights_return():
    theirs, their_w = knlp_masks()
    ours, our_w, pruner = our_masks()
    for step, (a, b) in enumerate(zip(theirs, ours), start=1):
        assert all(torch.equal(x, y) for x, y in zip(a, b)), f"masks differ after step {step}"
    for a, b in zip(their_w, our_w):
        assert all(torch.equal(x, y) for x, y in zip(a, b))
    # knlp's rule lets a pruned weight come back: it happens in this run
    returned = sum(
        int((now & ~before).sum())
        for prev, cur in zip(ours, ours[1:])
        for before, now in zip(prev, cur)
    )
    assert returned > 0
    # past the ramp the masks still change (scores move), where ours otherwise freeze
    assert any(
        not all(torch.equal(x, y) for x, y in zip(ours[i - 1], ours[i]))
        for i in range(RAMP_END + 1, ITERS)
    )
    assert abs(pruner.report()["sparsity"] - TARGET) < 0.05


def test_update_steps_go_on_past_the_ramp_only_when_reselecting():
    common = dict(target=0.5, warmup=2, ramp_end=6, frequency=2, kind="linear")
    assert [s for s, _ in mask_update_steps(12, **common)] == [4, 6]
    assert [s for s, _ in mask_update_steps(12, reselect=True, **common)] == [4, 6, 8, 10, 12]


def test_resume_restores_w0_and_masks():
    full, _, _ = our_masks()
    _, _, half = our_masks(stop=10)
    buf = io.BytesIO()
    torch.save(half.state_dict(), buf)
    state = torch.load(io.BytesIO(buf.getvalue()), weights_only=True)
    assert "initial" in state
    _, _, fresh = our_masks(stop=0)
    fresh.load_state_dict(state)
    assert all(torch.equal(a, b) for a, b in zip(fresh.masks, full[9]))
    assert all(torch.equal(a, b) for a, b in zip(fresh.initial or [], half.initial or []))
    del state["initial"]
    with pytest.raises(ValueError, match="initial weights"):
        fresh.load_state_dict(state)


def test_unknown_movement_score_is_refused():
    with pytest.raises(ValueError, match="movement_score='sanh'"):
        Pruner(
            [("w", nn.Parameter(torch.ones(2, 2)))],
            method="movement",
            movement_score="sanh",
            target=0.5,
            warmup=0,
            ramp_end=2,
            frequency=1,
            schedule="linear",
            scope="global",
        )
