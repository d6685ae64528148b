"""GPT-2 (any attention variant) as a transformers model: the modelling file
`make export` writes for every GPT-2 run without the GPT2LMHeadModel layout
(MLA, RA, RA+MLA, gated RA, output gate, and any architecture option
away from GPT-2's: RoPE, RMSNorm, SwiGLU, GQA, QK-norm, an untied head;
gpt2/export.py), as
modeling_kconfig_llm.py beside copies of the modules it imports
(lib/model/remote/source.py).
"""

from __future__ import annotations

from typing import Any

from gpt2.config import GPT2Config
from gpt2.model import GPT2
from gpt2.variants import modules

# RemoteConfig is imported for config.json's auto_map, which names it in this file
from lib.model.remote.causal_lm import RemoteCausalLM, RemoteConfig  # noqa: F401

# The attention variants' modules, which gpt2/model.py imports by name
# (gpt2/variants.py): the folder must carry them too (lib/model/remote/folder.py).
LOADED_BY_NAME = tuple(modules())


class GPT2RemoteForCausalLM(RemoteCausalLM):
    model: GPT2

    def build_model(self, fields: dict[str, Any]) -> GPT2:
        return GPT2(GPT2Config(**fields))

    def generation_window(self) -> int:
        # Learned positions end at block_size: like GPT2.generate, a longer
        # sequence is continued from its last block_size tokens.
        return self.model.config.block_size
