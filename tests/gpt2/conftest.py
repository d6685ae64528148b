"""Shared fixtures: a debug-sized GPT-2 that runs in milliseconds on a CPU."""

from __future__ import annotations

import pytest
import torch

from gpt2.config import GPT2Config
from gpt2.model import GPT2

# Test modules repeat these two numbers rather than importing conftest,
# which pytest may load under the same module name as another conftest.
VOCAB = 101  # deliberately not a power of two, to catch shape mix-ups
BLOCK = 32


@pytest.fixture
def tiny_config() -> GPT2Config:
    return GPT2Config(vocab_size=VOCAB, block_size=BLOCK, n_layer=2, n_head=4, n_embd=64)


@pytest.fixture
def tiny_model(tiny_config: GPT2Config) -> GPT2:
    torch.manual_seed(0)
    return GPT2(tiny_config).eval()
