"""The toy model family: config, one MLP block per layer, a tied-head bigram
model and its activation formula (what lib/estimate sizes it by).

Written once for the two toy family tests: tests/lib/model/test_model_family.py
imports it; tests/lib/model/test_third_family.py copies this text as toy/model.py
of a scratch project. Each test's FAMILY record maps the Kconfig symbols, since
they differ (the scratch project has its own TOY_N_EMBD).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from lib.model.activations import Activations, R, Shape
from lib.model.interface import LanguageModel, init_weights


@dataclass(frozen=True)
class ToyConfig:
    vocab_size: int
    block_size: int = 64
    n_embd: int = 32
    n_layer: int = 1
    n_head: int = 1
    dropout: float = 0.0

    def __post_init__(self) -> None:
        if self.n_embd < 1:
            raise ValueError(f"n_embd must be positive, got {self.n_embd}")


class ToyBlock(nn.Module):
    """x + MLP(LayerNorm(x)), position by position: a bigram model."""

    def __init__(self, n_embd: int) -> None:
        super().__init__()
        self.ln = nn.LayerNorm(n_embd)
        self.c_fc = nn.Linear(n_embd, 2 * n_embd)
        self.c_proj = nn.Linear(2 * n_embd, n_embd)

    def forward(self, x: Tensor) -> Tensor:
        return x + self.c_proj(torch.relu(self.c_fc(self.ln(x))))


class ToyLM(LanguageModel):
    """Each position sees only its own token, so generation keeps no state.
    Its modules are not named as GPT-2's (transformer.wte, transformer.h): the
    interface, not a layout, is what the rest of the project relies on."""

    def __init__(self, config: ToyConfig) -> None:
        super().__init__()
        self.config = config
        self.embed = nn.Embedding(config.vocab_size, config.n_embd)
        self.layers = nn.ModuleList(ToyBlock(config.n_embd) for _ in range(config.n_layer))
        self.norm = nn.LayerNorm(config.n_embd)
        self.tie_head()
        init_weights(self, [(b.c_proj,) for b in self.layers])

    def blocks(self) -> nn.ModuleList:
        return self.layers

    def embedding(self) -> nn.Embedding:
        return self.embed

    def hidden_states(self, idx: Tensor) -> Tensor:
        x = self.embed(idx)
        for block in self.layers:
            x = block(x)
        return self.norm(x)

    def forward(self, idx: Tensor, targets: Tensor | None = None):
        return self.logits_and_loss(self.hidden_states(idx), targets)

    def flops_per_token(self, seq_len: int) -> int:
        return 6 * self.num_params()

    def start_generation(self, idx: Tensor) -> tuple[Tensor, Any]:
        return self.lm_head(self.hidden_states(idx[:, -1:])), None

    def continue_generation(self, idx: Tensor, state: Any) -> tuple[Tensor, Any]:
        return self.lm_head(self.hidden_states(idx)), None

    def generation_bytes(self, seq_len: int, batch: int = 1) -> int:
        return 0


def activations(cfg: ToyConfig, s: Shape) -> Activations:
    """Saved tensors in bytes: per block its fp32 input, the LayerNorm output and
    three 2C-wide hiddens; outside the blocks the embedding and the final norm."""
    n, c, a = s.tokens, cfg.n_embd, s.act
    per_layer = {"block_input": R * n * c, "ln_out": a * n * c, "hidden": 3 * a * n * 2 * c}
    return Activations(per_layer, R * n * c + a * n * c, R * n * c)
