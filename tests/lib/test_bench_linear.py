"""make bench-linear: every linear shape of the configured model, each product through
PyTorch's kernel and oneDNN's, with what auto picks here."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import lib.bench.linear as linear
from lib.bench.linear import linear_shapes, run_linear_bench, time_shape
from lib.speed.cpu_linear import onednn_available, resolve_cpu_linear

needs_onednn = pytest.mark.skipif(
    not onednn_available(), reason="this PyTorch lacks oneDNN's linear kernel"
)


def test_the_shapes_are_the_models_plain_linear_layers_grouped():
    class Float8ish(nn.Linear):  # a subclass keeps its own kernels: not ours to time
        pass

    model = nn.ModuleDict(
        {"a": nn.Linear(8, 4), "b": nn.Linear(8, 4, bias=False), "c": nn.Linear(4, 8)}
    )
    model["d"] = Float8ish(3, 3)
    assert linear_shapes(model) == {(8, 4): ["a", "b"], (4, 8): ["c"]}


@needs_onednn
def test_each_rate_is_the_products_flops_over_its_median_time(monkeypatch):
    # A clock that advances 1 ms per timed call: 2 x 4 x 8 x 2 = 128 FLOPs each.
    clock = iter(range(10_000))
    monkeypatch.setattr(linear.time, "perf_counter", lambda: next(clock) * 1e-3)
    shape = time_shape(rows=4, k=8, n=2, calls=1, rounds=3)
    for product in ("forward", "input_grad"):
        rates = shape[product]["gflops"]
        assert rates == {"torch": pytest.approx(128 / 1e-3 / 1e9), "onednn": pytest.approx(128e-6)}
        assert shape[product]["onednn_vs_torch"] == pytest.approx(1.0)
    assert (shape["rows"], shape["in"], shape["out"]) == (4, 8, 2)


@needs_onednn
def test_the_bench_times_every_shape_of_the_configured_model(tiny_run):
    run = tiny_run()
    r = run_linear_bench(run, calls=2, rounds=1)
    # 2 layers x 32 wide: attention in and out, MLP in and out, the head over the vocabulary
    got = {(s["in"], s["out"]): s["layers"] for s in r["shapes"]}
    assert got[(32, 96)] == ["transformer.h.0.attn.c_attn", "transformer.h.1.attn.c_attn"]
    assert {(32, 32), (32, 128), (128, 32)} <= got.keys() and len(got) == 5
    assert r["rows"] == run.BATCH_SIZE * 32 and r["threads"] == torch.get_num_threads()
    for s in r["shapes"]:
        for product in ("forward", "input_grad"):
            assert all(v > 0 for v in s[product]["gflops"].values())
    assert (r["auto"]["cpu_linear"], r["auto"]["reason"]) == resolve_cpu_linear(
        "auto", torch.device("cpu"), "fp32", False
    )


def test_without_onednns_kernel_there_is_nothing_to_compare(tiny_run, monkeypatch):
    monkeypatch.setattr(linear, "onednn_available", lambda: False)
    with pytest.raises(RuntimeError, match="lacks oneDNN's linear kernel"):
        run_linear_bench(tiny_run(), calls=1, rounds=1)
