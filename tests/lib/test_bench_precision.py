"""`make bench-precision` (lib/bench/precision.py): the gradient's change under
bf16 autocast, against a transcription, and on the benchmark models."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
from torch import nn

from lib.bench.precision import describe, gradient_change, run_precision_bench
from lib.config.run_config import run_config_from_defaults


class _Tiny(nn.Module):
    """model(idx, targets) -> (logits, loss), as the benchmark models are called."""

    def __init__(self, linear: bool) -> None:
        super().__init__()
        self.embed = nn.Embedding(11, 16)
        self.head = nn.Linear(16, 11) if linear else None
        self.scale = nn.Parameter(torch.ones(11))

    def forward(self, idx, targets):
        x = self.embed(idx)
        logits = self.head(x) if self.head is not None else x[..., :11] * self.scale
        return logits, nn.functional.cross_entropy(logits.float().flatten(0, 1), targets.flatten())


def test_gradient_change_is_the_relative_norm_of_the_difference():
    torch.manual_seed(0)
    model = _Tiny(linear=True)
    idx = torch.randint(11, (2, 8), generator=torch.Generator().manual_seed(1))
    result = gradient_change(model, idx, seed=0)
    # by hand: the same batch in float32, then with the Linear under bf16 autocast
    grads = []
    for enabled in (False, True):
        model.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=enabled):
            loss = model(idx, idx)[1]
        loss.backward()
        grads.append(
            (
                {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None},
                float(loss),
            )
        )
    (ref, loss32), (low, loss16) = grads
    diff = sum(float((low[n] - g).square().sum()) for n, g in ref.items()) ** 0.5
    norm = sum(float(g.square().sum()) for g in ref.values()) ** 0.5
    assert result["grad_change"] == pytest.approx(diff / norm, rel=1e-6)
    assert 1e-4 < result["grad_change"] < 0.1  # bf16's rounding: visible, small
    assert result["loss_change"] == pytest.approx(loss16 - loss32, abs=1e-7)
    per_param = {n: float((low[n] - g).norm() / g.norm()) for n, g in ref.items()}
    assert result["worst_param"] == max(per_param, key=per_param.__getitem__)


def test_no_op_autocast_touches_leaves_the_gradient_unchanged():
    """An embedding and an elementwise product: nothing autocast lowers."""
    torch.manual_seed(0)
    result = gradient_change(_Tiny(linear=False), torch.randint(11, (2, 8)), seed=0)
    assert result["grad_change"] == 0.0 and result["loss_change"] == 0.0


def test_benchmark_models_and_the_key_epsilon():
    """Vanilla and HAMT at each seed; a larger HAMT_KEY_EPS moves HAMT's
    gradient less under bf16 (the Jacobian it bounds)."""
    shape = {"HAMT_N_LAYER": "2", "HAMT_N_EMBD": "32", "HAMT_NUM_SLOTS": "4"}
    results = {
        eps: run_precision_bench(
            run_config_from_defaults({"MODEL_HAMT": "y", "HAMT_KEY_EPS": eps, **shape}),
            vocab=64,
            seq_len=32,
            batch=2,
            seeds=(0, 1),
        )
        for eps in ("1e-12", "1e-2")
    }
    default = results["1e-12"]
    assert [(r["variant"], r["seed"]) for r in default["rows"]] == [
        ("vanilla", 0),
        ("hamt", 0),
        ("vanilla", 1),
        ("hamt", 1),
    ]
    assert default["model_configs"]["hamt"]["key_eps"] == 1e-12
    assert results["1e-2"]["model_configs"]["hamt"]["key_eps"] == 1e-2
    assert (default["n_layer"], default["n_embd"], default["seq_len"]) == (2, 32, 32)

    def hamt(result):
        return [r["grad_change"] for r in result["rows"] if r["variant"] == "hamt"]

    assert all(b < a for a, b in zip(hamt(default), hamt(results["1e-2"])))
    assert "hamt       seed 1: gradient" in describe(default)
    with pytest.raises(ValueError, match="unknown variants flash"):
        run_precision_bench(
            run_config_from_defaults({}), vocab=64, seq_len=16, seeds=(0,), variants=("flash",)
        )


def test_each_model_is_built_alone_from_its_seed(monkeypatch):
    """Only the chosen variants are built, and a variant's weights, hence its
    figures, are the same whatever else is chosen."""
    from lib.model import registry

    built = []
    spied = [
        replace(f, build=lambda config, real=f.build: built.append(config) or real(config))
        for f in registry.families()
    ]
    monkeypatch.setattr(registry, "families", lambda: spied)
    run = run_config_from_defaults(
        {"MODEL_HAMT": "y", "HAMT_N_LAYER": "1", "HAMT_N_EMBD": "32", "HAMT_NUM_SLOTS": "4"}
    )
    alone, together = (
        run_precision_bench(run, vocab=64, seq_len=16, batch=2, seeds=(3,), variants=chosen)
        for chosen in (("hamt",), ("mla", "hamt"))
    )
    assert [type(c).__name__ for c in built] == ["HAMTConfig", "GPT2Config", "HAMTConfig"]
    assert alone["rows"][0] == together["rows"][1]  # hamt at seed 3, figure for figure
