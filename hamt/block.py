"""One HAMT block: GPT-2's pre-LayerNorm block with the holographic memory
in place of attention."""

from __future__ import annotations

from torch import Tensor, nn

from gpt2.model import MLP  # the same feed-forward layer as GPT-2's blocks
from hamt.config import HAMTConfig
from hamt.memory import HolographicMemory


class Block(nn.Module):
    """x + memory(ln_1(x)), then x + mlp(ln_2(x))."""

    def __init__(self, config: HAMTConfig) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.n_embd, bias=config.bias)
        self.mem = HolographicMemory(config)
        self.ln_2 = nn.LayerNorm(config.n_embd, bias=config.bias)
        self.mlp = MLP(config)

    def forward(
        self, x: Tensor, state: Tensor | None, need_state: bool, need_aux: bool, offset: int = 0
    ) -> tuple[Tensor, Tensor | None, dict[str, Tensor]]:
        y, state, stats = self.mem(self.ln_1(x), state, need_state, need_aux, offset)
        x = x + y
        return x + self.mlp(self.ln_2(x)), state, stats

    def step(self, x: Tensor, state: Tensor, position: int) -> tuple[Tensor, Tensor]:
        y, state = self.mem.step(self.ln_1(x), state, position)
        x = x + y
        return x + self.mlp(self.ln_2(x)), state
