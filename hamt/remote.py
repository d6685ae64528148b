"""HAMT as a transformers model: the modelling file `make export` writes for
HAMT runs (hamt/export.py), as modeling_kconfig_llm.py beside copies of the
modules it imports (lib/model/remote/source.py).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from hamt.config import HAMTConfig
from hamt.memory import HolographicMemory, parseval_weights, slot_periods
from hamt.model import HAMT

# RemoteConfig is imported for config.json's auto_map, which names it in this file
from lib.model.remote.causal_lm import RemoteCausalLM, RemoteConfig  # noqa: F401


class HAMTRemoteForCausalLM(RemoteCausalLM):
    model: HAMT

    def build_model(self, fields: dict[str, Any]) -> HAMT:
        return HAMT(HAMTConfig(**fields))

    @torch.no_grad()
    def reset_buffers(self, module: nn.Module) -> None:
        # HolographicMemory's two buffers are not persistent (derived from the config).
        if isinstance(module, HolographicMemory):
            cfg = self.model.config
            module.parseval.copy_(parseval_weights(cfg.binding, cfg.hcm_dim))
            module.periods.copy_(slot_periods(cfg))
