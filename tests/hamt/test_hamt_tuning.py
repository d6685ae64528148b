"""Pinned kernel configurations (HAMT_KERNEL_PIN, hamt/tuning.py), on a
stand-in for fla's autotuned kernels (fla-core is absent on CPU installs)."""

from __future__ import annotations

import sys
import types
from dataclasses import dataclass

import pytest

from hamt import tuning
from hamt.config import HAMTConfig
from hamt.memory import HolographicMemory


@dataclass(frozen=True)
class Config:
    block: int
    num_warps: int
    num_stages: int


class Autotuner:
    """Triton's Autotuner as far as pinning sees it: configs, prune_configs
    (here: blocks wider than the call's K are pruned, as fla prunes), and a
    run that times every pruned configuration unless only one is left."""

    def __init__(self, fn):
        self.fn = fn
        self.configs = [Config(b, w, s) for b in (16, 32, 64) for w in (2, 4, 8) for s in (1, 3)]
        self.timed: list[Config] = []

    def prune_configs(self, kwargs):
        return [c for c in self.configs if c.block <= kwargs["K"]]

    def run(self, **kwargs):
        pruned = self.prune_configs(kwargs)
        if len(pruned) > 1:
            self.timed += pruned
        return pruned[0] if len(pruned) == 1 else min(pruned, key=lambda c: c.block)


class Heuristics:  # triton.heuristics wraps the autotuner, keeping it as .fn
    def __init__(self, fn):
        self.fn = fn


@pytest.fixture
def fla_module(monkeypatch):
    module = types.ModuleType("fake_fla_kernels")
    module.kernel_a = Heuristics(Autotuner(fn=None))
    module.kernel_b = Autotuner(fn=None)
    module.helper = object()
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setattr(tuning, "_STATE", {})
    return module


def test_pinning_leaves_one_configuration_per_shape_class(fla_module):
    tuners = tuning.autotuners([fla_module])
    assert {id(t) for t in tuners} == {id(fla_module.kernel_a.fn), id(fla_module.kernel_b)}
    tuning.pin_kernels(True, [fla_module.__name__])
    for tuner in tuners:
        # Of those allowed at K = 16 (block 16 only): 4 warps, then 2 stages' nearest (1 first).
        assert tuner.prune_configs({"K": 16}) == [Config(16, 4, 1)]
        assert tuner.prune_configs({"K": 64}) == [Config(16, 4, 1)]
        assert tuner.run(K=32) == Config(16, 4, 1) and tuner.timed == []
    tuning.pin_kernels(True, [fla_module.__name__])  # idempotent: still one
    assert fla_module.kernel_b.prune_configs({"K": 64}) == [Config(16, 4, 1)]
    tuning.pin_kernels(False, [fla_module.__name__])  # HAMT_KERNEL_PIN=n: autotunes again
    assert len(fla_module.kernel_b.prune_configs({"K": 64})) == 18
    fla_module.kernel_b.run(K=32)
    assert len(fla_module.kernel_b.timed) == 12


def test_choose_prefers_four_warps_and_two_stages():
    configs = [Config(32, 8, 2), Config(64, 4, 3), Config(16, 4, 2), Config(32, 4, 2)]
    assert tuning.choose(configs) == Config(16, 4, 2)  # the first of the two exact matches
    assert tuning.choose([Config(16, 2, 2), Config(16, 8, 2)]) == Config(16, 2, 2)


def test_the_layer_asks_for_the_pinned_kernels_by_default(monkeypatch):
    import hamt.kernel as kernel
    import hamt.memory as memory
    from hamt.gla_op import as_gla

    asked = []
    monkeypatch.setattr(kernel, "kernel_problem", lambda device: None)
    monkeypatch.setattr(
        memory, "load_chunk_gla", lambda pinned: asked.append(pinned) or as_gla("reference")
    )
    import torch

    x = torch.randn(1, 8, 16)
    for pin in (True, False):
        fields = dict(vocab_size=11, n_embd=16, num_slots=4, scan_backend="triton")
        layer = HolographicMemory(HAMTConfig(**fields, kernel_pin=pin))
        layer(x)
    assert asked == [True, False]
    assert HAMTConfig(vocab_size=11).kernel_pin is True
