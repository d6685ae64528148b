"""shapes_only(): a model on the meta device with the shapes of the real one, built
without running an initialiser on a meta tensor, while a real tensor's still runs."""

from __future__ import annotations

import gc

import pytest
import torch
from torch.overrides import TorchFunctionMode

from gpt2.config import GPT2Config
from gpt2.model import GPT2
from hamt.config import HAMTConfig
from hamt.model import HAMT
from lib.model.meta import shapes_only

BUILDS = {
    "gpt2": lambda: GPT2(GPT2Config(vocab_size=80, block_size=32, n_layer=2, n_head=2, n_embd=32)),
    "hamt": lambda: HAMT(HAMTConfig(vocab_size=80, block_size=32, n_layer=2, n_embd=32)),
}


class Fills(TorchFunctionMode):
    """Records every random fill that reaches it, with its tensor's device."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        kwargs = kwargs or {}
        if func in (torch.Tensor.normal_, torch.Tensor.uniform_, torch.nn.init.normal_):
            tensor = args[0] if args else kwargs.get("tensor")
            self.seen.append(f"{func.__name__} on {tensor.device.type}")
        return func(*args, **kwargs)


@pytest.fixture
def own_mode_stack():
    """The builds below see only this test's modes. A mode left on the stack by an
    earlier test is named; objects of earlier tests are collected first and none
    mid-build, where a finalizer that leaves a mode would change the stack under it."""
    assert torch._C._len_torch_function_stack() == 0, "an earlier test left a torch mode on"
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


@pytest.mark.parametrize("family", list(BUILDS))
def test_the_shapes_are_the_real_models_and_no_fill_runs_on_meta(family, own_mode_stack):
    real = {name: p.shape for name, p in BUILDS[family]().named_parameters()}
    # beneath torch.device("meta") alone the fills run (the recorder sees them) ...
    with Fills() as plain, torch.device("meta"):
        BUILDS[family]()
    assert "normal_ on meta" in plain.seen, plain.seen
    # ... beneath shapes_only none reaches it
    with Fills() as recorded, shapes_only():
        model = BUILDS[family]()
    assert recorded.seen == []
    assert {name: p.shape for name, p in model.named_parameters()} == real
    off_meta = [name for name, p in model.named_parameters() if not p.is_meta]
    assert off_meta == [], f"{off_meta} were built off the meta device"


def test_a_real_tensors_initialiser_still_runs_inside():
    weight = torch.zeros(64, 8, device="cpu")
    with shapes_only():
        torch.nn.init.normal_(weight, std=0.02)
        torch.nn.init.uniform_(bias := torch.zeros(8, device="cpu"))
        created = torch.empty(3)
    assert weight.std().item() > 0.01 and bias.abs().sum().item() > 0
    assert created.is_meta  # tensors made inside are on meta, as under torch.device("meta")


def test_a_factory_swapped_out_when_torch_first_listed_them_still_lands_on_meta():
    """transformers' from_pretrained swaps torch.linspace for a wrapper while it builds;
    had torch.device() first listed its factories then, the real linspace stayed off
    the list, and HAMT's decay logits (torch.linspace) were built on the CPU."""
    from torch.utils import _device

    real = torch.linspace
    torch.linspace = lambda *args, **kwargs: real(*args, **kwargs)  # as transformers does
    try:
        _device._device_constructors.cache_clear()
        assert real not in _device._device_constructors()  # the list is now stale
    finally:
        torch.linspace = real
    with torch.device("meta"):
        assert torch.linspace(0, 1, 3).device.type == "cpu"  # what torch does then
    with shapes_only():
        model = BUILDS["hamt"]()
    assert [name for name, p in model.named_parameters() if not p.is_meta] == []
    _device._device_constructors.cache_clear()
