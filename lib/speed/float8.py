"""Float8 training of the blocks' linear layers through torchao (TRAIN_FLOAT8).

torchao's convert_to_float8_training swaps nn.Linear modules for its
Float8Linear, whose matmuls cast their operands to float8 (e4m3) with
dynamic scales, per tensor ("tensorwise") or per row ("rowwise"), and run
on the float8 tensor cores of compute capability 8.9 (Ada) and 9.0 (Hopper)
and later; weights, gradients and optimizer state stay as they were. The
swap keeps each layer's weight Parameter, so the optimizer, the pruner's
masks and checkpoints see the same tensors under the same names.

Converted here: every Linear inside the blocks (LanguageModel.blocks()) whose two
dimensions are multiples of 16, which float8 matmuls require (torchao's own
filters test the same). Never the LM head: it shares its weight with the
token embedding and its logits feed a softmax over the whole vocabulary,
where float8's 3-bit mantissa costs accuracy (torchao's recipes leave the
output layer in high precision too). torchao's float8 is meant to run under
torch.compile, which fuses the casts and scales; eager float8 is slower
than bf16.
"""

from __future__ import annotations

import dataclasses
import importlib.util
from collections.abc import Callable

import torch
from torch import nn

RECIPES = ("tensorwise", "rowwise")
# Lowest compute capability whose tensor cores run each recipe's float8
# matmul (torch._scaled_mm: per-tensor scales from sm89, per-row from sm90).
MIN_CAPABILITY = {"tensorwise": (8, 9), "rowwise": (9, 0)}


def float8_filter(model: nn.Module) -> Callable[[nn.Module, str], bool]:
    """torchao's module_filter_fn for model: whether convert_float8 swaps a
    module (module docstring)."""
    inside = {id(m) for m in model.blocks().modules()}  # model: a LanguageModel

    def swapped(module: nn.Module, fqn: str) -> bool:
        if not isinstance(module, nn.Linear) or id(module) not in inside:
            return False
        out_features, in_features = module.weight.shape
        return out_features % 16 == 0 and in_features % 16 == 0

    return swapped


def float8_candidates(model: nn.Module) -> list[str]:
    """Names of the modules convert_float8 would swap."""
    swapped = float8_filter(model)
    return [name for name, module in model.named_modules() if swapped(module, name)]


def check_float8(recipe: str, device: torch.device) -> None:
    """Refuse, before the model is touched, what cannot train in float8 here."""
    if recipe not in RECIPES:
        raise ValueError(f"unknown float8 recipe {recipe!r}; one of {', '.join(RECIPES)}")
    if importlib.util.find_spec("torchao") is None:
        raise RuntimeError(
            "CONFIG_TRAIN_FLOAT8 is set but torchao is not installed: "
            "pip install torchao, or set TRAIN_FLOAT8 to none"
        )
    if device.type != "cuda" or getattr(torch.version, "hip", None):
        raise RuntimeError(
            f"CONFIG_TRAIN_FLOAT8 needs an NVIDIA GPU with float8 tensor cores "
            f"(compute capability 8.9 or later), this run is on {device.type}; "
            f"set TRAIN_FLOAT8 to none"
        )
    have = torch.cuda.get_device_capability(device)
    need = MIN_CAPABILITY[recipe]
    if have < need:
        raise RuntimeError(
            f"CONFIG_TRAIN_FLOAT8 {recipe} needs compute capability "
            f"{need[0]}.{need[1]} or later (Hopper for rowwise, Ada or Hopper for "
            f"tensorwise); {torch.cuda.get_device_name(device)} is "
            f"{have[0]}.{have[1]}; set TRAIN_FLOAT8 to none"
        )


def convert_float8(model: nn.Module, recipe: str, emulate: bool = False) -> list[str]:
    """Swap the filtered Linear modules for torchao's Float8Linear in place;
    return their names. emulate runs the float8 arithmetic without float8
    hardware (torchao's emulation: for tests on a CPU, never for speed)."""
    from torchao.float8 import Float8LinearConfig, convert_to_float8_training

    config = Float8LinearConfig.from_recipe_name(recipe)
    if emulate:
        config = dataclasses.replace(config, emulate=True)
    names = float8_candidates(model)
    convert_to_float8_training(model, module_filter_fn=float8_filter(model), config=config)
    return names
