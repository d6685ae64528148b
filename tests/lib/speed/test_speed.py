"""The speed options (lib/speed/: apply.py, compile.py, float8.py): each is
refused where it cannot run, applied where it can, and recorded."""

from __future__ import annotations

import json

import pytest
import torch

from lib.speed import float8
from lib.speed.apply import apply_tf32, check_attention_backend, with_attention_backend
from lib.speed.compile import CompileOptions, RegionalForward, compile_model
from lib.speed.host_malloc import keep_freed_memory
from lib.train.naming import create_run_dir
from lib.train.trainer import Trainer
from tests.lib.model.test_fused_loss import _tiny
from tests.lib.stops import train_until

CPU, CUDA = torch.device("cpu"), torch.device("cuda")


def _train(run):
    run_dir = create_run_dir(run)
    summary = train_until(Trainer(run, run_dir, log=lambda _: None), None)
    return summary, json.loads((run_dir / "metrics.json").read_text())


# -- compile -------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["max_autotune", "reduce_overhead"])
def test_cuda_graph_modes_are_refused_off_cuda(mode):
    with pytest.raises(RuntimeError, match="needs a CUDA GPU"):
        CompileOptions(mode).check(CPU)
    CompileOptions(mode).check(CUDA)
    CompileOptions("max_autotune_no_cudagraphs").check(CPU)


def test_regional_compile_swaps_compiled_blocks_in_for_the_call_only(monkeypatch):
    """Each block runs its compiled forward inside the call; outside, the model
    is the eager one with its state_dict unchanged."""
    torch.manual_seed(0)
    model = _tiny("gpt2")
    calls: list[str] = []

    def fake_compile(fn, mode=None):
        calls.append(f"compiled {mode}")

        def run(*args, **kwargs):
            calls.append("block")
            return fn(*args, **kwargs)

        return run

    monkeypatch.setattr(torch, "compile", fake_compile)
    keys = list(model.state_dict())
    x = torch.randint(0, 65, (2, 16))
    eager = model(x, x)[1]
    forward = compile_model(model, CompileOptions("max_autotune_no_cudagraphs", regional=True))
    assert isinstance(forward, RegionalForward)
    assert calls == ["compiled max-autotune-no-cudagraphs"] * 2  # one per block
    assert forward(x, x)[1].item() == eager.item()
    assert calls[2:] == ["block", "block"]
    model(x, x)  # the eager model after the call: no compiled block runs
    assert calls[2:] == ["block", "block"] and list(model.state_dict()) == keys
    assert all("forward" not in block.__dict__ for block in model.transformer.h)


def test_a_failing_regional_compile_falls_back_to_eager(tiny_run, monkeypatch):
    def exploding(fn, mode=None):
        def run(*args, **kwargs):
            raise RuntimeError("inductor exploded (simulated)")

        return run

    # Both runs on the same matmul kernels (a compiled run is never given oneDNN
    # linears), so the fallback run must match the eager one exactly.
    settings = dict(GPT2_MAX_ITERS=3, GPT2_EVAL_INTERVAL=3, CPU_LINEAR_BACKEND_ATEN="y")
    monkeypatch.delenv("PYTORCH_CUDA_ALLOC_CONF", raising=False)  # recorded when set
    eager, defaults = _train(tiny_run(RUN_NAME="eager", **settings))
    assert defaults["speed"] == {
        "loss_impl": "plain",
        "loss_impl_reason": "as configured",
        "compile": {"mode": "default", "regional": False},
        "sdpa_backend": "auto",
        "tf32": False,
        "float8": "none",
        "float8_layers": 0,
        "cpu_linear": "aten",
        "cpu_linear_reason": "as configured",
        "cpu_linear_layers": 0,
        "host_malloc": keep_freed_memory(),  # CPU_MALLOC_KEEP=y on a CPU: set, or why not
        "pin_memory": False,  # PIN_MEMORY=y, but a CPU run has nothing to pin
        "cudnn_benchmark": False,
        "cuda_alloc_conf": {"value": None, "source": None},
        "gpu_warmup": None,
    }
    monkeypatch.setattr(torch, "compile", exploding)
    summary, metrics = _train(
        tiny_run(RUN_NAME="regional", COMPILE_MODEL="y", COMPILE_REGIONAL="y", **settings)
    )
    assert summary["compiled"] is False and "inductor exploded" in summary["compile_error"]
    assert summary["events"][0]["event"] == "compile_failed"
    assert summary["train_loss"] == eager["train_loss"]
    assert metrics["speed"]["compile"] == {"mode": "default", "regional": True}


@pytest.mark.slow
def test_regional_compile_with_the_chunked_loss_trains_as_eager(tiny_run):
    """The one real torch.compile here: blocks compiled once (shared code),
    the chunked loss eager; the losses are eager's within float rounding."""
    from torch._dynamo.utils import counters

    settings = dict(GPT2_MAX_ITERS=4, GPT2_EVAL_INTERVAL=4, TRAIN_LOSS_IMPL_CHUNKED="y")
    eager, _ = _train(tiny_run(RUN_NAME="eager", **settings))
    counters.clear()
    summary, metrics = _train(
        tiny_run(RUN_NAME="regional", COMPILE_MODEL="y", COMPILE_REGIONAL="y", **settings)
    )
    assert summary["compiled"] is True and summary["compile_error"] is None
    # One graph for the training forward and one for evaluation's (no grad, eval
    # mode), each shared by both blocks: per-block compilation would make four.
    assert counters["stats"]["unique_graphs"] == 2
    assert metrics["speed"]["loss_impl"] == "chunked"
    assert summary["train_loss"]["values"] == pytest.approx(eager["train_loss"]["values"], rel=1e-4)


# -- attention backend ------------------------------------------------------------


def test_attention_backends_the_cpu_lacks_are_refused_at_the_start():
    check_attention_backend("math", CPU, "fp32", 16)
    check_attention_backend("flash", CPU, "fp32", 16)  # the CPU has a flash kernel
    for backend in ("efficient", "cudnn"):
        with pytest.raises(RuntimeError, match=f"CONFIG_SDPA_BACKEND {backend} cannot run"):
            check_attention_backend(backend, CPU, "fp32", 16)


def test_the_attention_backend_is_in_force_inside_the_forward_only():
    seen = []

    def forward():
        seen.append(
            (torch.backends.cuda.flash_sdp_enabled(), torch.backends.cuda.math_sdp_enabled())
        )

    with_attention_backend(forward, "math")()
    forward()
    assert seen == [(False, True), (True, True)]
    assert with_attention_backend(forward, "auto") is forward


def test_a_run_asking_for_a_missing_attention_kernel_stops_before_training(tiny_run):
    run = tiny_run(SDPA_BACKEND_EFFICIENT="y", RUN_NAME="efficient")
    with pytest.raises(RuntimeError, match="CONFIG_SDPA_BACKEND efficient cannot run"):
        Trainer(run, create_run_dir(run), log=lambda _: None)


# -- TF32 -----------------------------------------------------------------------


def test_tf32_is_set_for_cuda_only():
    before = torch.get_float32_matmul_precision()
    try:
        assert apply_tf32(True, CPU) is False and torch.get_float32_matmul_precision() == before
        assert apply_tf32(False, CUDA) is False and torch.get_float32_matmul_precision() == before
        assert apply_tf32(True, CUDA) is True and torch.get_float32_matmul_precision() == "high"
    finally:
        torch.set_float32_matmul_precision(before)


# -- float8 ---------------------------------------------------------------------


def test_float8_is_refused_on_a_cpu_and_without_torchao(monkeypatch):
    with pytest.raises(RuntimeError, match="needs an NVIDIA GPU"):
        float8.check_float8("tensorwise", CPU)
    monkeypatch.setattr(float8.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(RuntimeError, match="pip install torchao"):
        float8.check_float8("tensorwise", CUDA)


@pytest.mark.parametrize(
    "capability, tensorwise, rowwise",
    [((8, 0), False, False), ((8, 9), True, False), ((9, 0), True, True)],
)
def test_float8_needs_ada_or_hopper(monkeypatch, capability, tensorwise, rowwise):
    monkeypatch.setattr(float8.importlib.util, "find_spec", lambda name: object())
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "Some GPU")
    for recipe, allowed in (("tensorwise", tensorwise), ("rowwise", rowwise)):
        if allowed:
            float8.check_float8(recipe, CUDA)
        else:
            with pytest.raises(RuntimeError, match="compute capability"):
                float8.check_float8(recipe, CUDA)


def test_float8_converts_the_blocks_linears_whose_sizes_allow_it():
    from gpt2.config import GPT2Config
    from gpt2.model import GPT2

    # n_embd 24: c_attn 72 x 24 and c_proj 24 x 24 are not multiples of 16;
    # the MLP's 96 x 24 neither; n_embd 32 makes every block Linear eligible.
    narrow = GPT2(
        GPT2Config(
            n_layer=1, n_head=2, n_embd=24, block_size=8, vocab_size=64, dropout=0.0, bias=False
        )
    )
    assert float8.float8_candidates(narrow) == []
    wide = _tiny("gpt2")
    names = float8.float8_candidates(wide)
    assert names == [
        f"transformer.h.{i}.{m}"
        for i in range(2)
        for m in ("attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj")
    ]
    assert not float8.float8_filter(wide)(wide.lm_head, "lm_head")  # 72 x 32 would pass the sizes


@pytest.mark.parametrize("recipe", float8.RECIPES)
def test_float8_conversion_trains_in_emulation(recipe):
    """torchao's emulated float8 on the CPU: the swap keeps each weight
    Parameter (optimizer and pruner masks stay valid) and the loss stays
    near the bf16 loss."""
    pytest.importorskip("torchao")
    torch.manual_seed(0)
    model = _tiny("gpt2")
    x = torch.randint(0, 65, (2, 16))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        reference = model(x, x)[1].item()
    weights = {n: p for n, p in model.named_parameters()}
    converted = float8.convert_float8(model, recipe, emulate=True)
    assert len(converted) == 8
    assert type(model.transformer.h[0].mlp.c_fc).__name__ == "Float8Linear"
    assert type(model.lm_head) is torch.nn.Linear
    assert all(p is weights[n] for n, p in model.named_parameters())
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = model(x, x)[1]
    loss.backward()
    assert loss.item() == pytest.approx(reference, rel=0.02)
    assert model.transformer.h[0].mlp.c_fc.weight.grad.abs().sum() > 0


def test_a_float8_run_on_a_cpu_stops_before_training(tiny_run):
    run = tiny_run(TRAIN_FLOAT8_TENSORWISE="y", RUN_NAME="fp8")
    with pytest.raises(RuntimeError, match="CONFIG_TRAIN_FLOAT8 needs an NVIDIA GPU"):
        Trainer(run, create_run_dir(run), log=lambda _: None)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_float8_converts_for_real_on_a_capable_gpu():
    pytest.importorskip("torchao")
    if torch.cuda.get_device_capability() < (8, 9):
        pytest.skip("needs compute capability 8.9 or later")
    torch.manual_seed(0)
    model = _tiny("gpt2").cuda()
    float8.check_float8("tensorwise", CUDA)
    assert len(float8.convert_float8(model, "tensorwise")) == 8
    x = torch.randint(0, 65, (2, 16), device="cuda")
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(x, x)[1]
    loss.backward()
    assert torch.isfinite(loss)
