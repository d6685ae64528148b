"""Published GPT-2 sizes as plain data.

A preset fixes only the shape of the network (depth, heads, width). The
context length, dropout and biases belong to the run's configuration, so
the same preset can be trained with a short context on a CPU or with the
full 1024 tokens on a GPU.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType


@dataclass(frozen=True)
class ModelSize:
    """Shape of a GPT-2 network: blocks, attention heads and width."""

    n_layer: int
    n_head: int
    n_embd: int


# Read-only so that no caller can silently change a published size for the
# rest of the process.
PRESETS: Mapping[str, ModelSize] = MappingProxyType(
    {
        # GPT-2 small, 124M parameters (Radford et al. 2019, Table 2).
        "124m": ModelSize(n_layer=12, n_head=12, n_embd=768),
        # GPT-2 medium, 350M parameters (Radford et al. 2019, Table 2).
        "350m": ModelSize(n_layer=24, n_head=16, n_embd=1024),
        # GPT-2 large, 774M parameters (Radford et al. 2019, Table 2).
        "774m": ModelSize(n_layer=36, n_head=20, n_embd=1280),
        # GPT-2 XL, 1558M parameters (Radford et al. 2019, Table 2).
        "1558m": ModelSize(n_layer=48, n_head=25, n_embd=1600),
    }
)
