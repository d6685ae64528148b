"""Write a trained model as a Hugging Face folder with remote code.

transformers itself writes config.json (the family's config, auto_map naming
the classes in modeling_kconfig_llm.py), generation_config.json and
model.safetensors (the tied head stored once), from the family's template
classes wrapped around the trained model; source.py adds the code.
"""

from __future__ import annotations

import importlib
from dataclasses import asdict
from pathlib import Path
from typing import Any

from lib.model.interface import LanguageModel
from lib.model.remote.source import copy_sources

MODELING_FILE = "modeling_kconfig_llm.py"


def save_remote(
    model: LanguageModel, family: str, template: str, out: Path, **config_extra: Any
) -> list[str]:
    """Save `model` (its `config` a dataclass) into out with the code of the
    template module (gpt2.remote, hamt.remote), which imports RemoteConfig
    and defines one RemoteCausalLM subclass, and may list in LOADED_BY_NAME
    the modules its code imports by name (source.copy_sources); returns the
    code files."""
    from transformers.utils import logging as hf_logging

    from lib.model.remote.causal_lm import RemoteCausalLM, RemoteConfig

    module = importlib.import_module(template)
    (model_cls,) = (
        c
        for c in vars(module).values()
        if isinstance(c, type) and issubclass(c, RemoteCausalLM) and c is not RemoteCausalLM
    )
    config = RemoteConfig(family=family, model_config=asdict(model.config), **config_extra)
    stem = Path(MODELING_FILE).stem
    config.auto_map = {
        "AutoConfig": f"{stem}.{RemoteConfig.__name__}",
        "AutoModelForCausalLM": f"{stem}.{model_cls.__name__}",
    }
    # fp32 on disk, as the vanilla export writes it
    wrapper = model_cls(config, model=model.to("cpu").float())
    wrapper.generation_config.use_cache = False  # the model recomputes (causal_lm.py)
    shown = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # a bar for one small file only clutters `make export`
    try:
        wrapper.save_pretrained(out)
    finally:
        if shown:
            hf_logging.enable_progress_bar()
    return copy_sources(
        template, Path(out), MODELING_FILE, tuple(getattr(module, "LOADED_BY_NAME", ()))
    )
