"""GPT-2 model family: config from Kconfig (GPT2_* symbols), model builder."""
from __future__ import annotations

import re
from dataclasses import fields
from typing import Any

from lib.registry import ModelFamily
from gpt2.config import GPT2Config

_PREFIX = "GPT2_"


def from_run_config(run: Any, vocab_size: int) -> GPT2Config:
    """GPT2_<FIELD> symbols -> GPT2Config.<field>, mechanically; a size other
    than "custom" (the GPT2_MODEL choice) takes its shape from the preset."""
    kwargs: dict[str, Any] = {}
    for f in fields(GPT2Config):
        name = _PREFIX + f.name.upper()
        if name in run.values:
            kwargs[f.name] = run.values[name]
    if run.get("GPT2_PAD_VOCAB"):
        vocab_size = -(-vocab_size // 64) * 64
    kwargs["vocab_size"] = vocab_size
    size = run.GPT2_MODEL
    try:
        if size == "custom":
            return GPT2Config(**kwargs)
        return GPT2Config.from_preset(size, **kwargs)
    except ValueError as err:  # name the Kconfig symbols the user can change
        message = str(err)
        for f in fields(GPT2Config):
            message = re.sub(rf"\b{f.name}\b", "CONFIG_" + _PREFIX + f.name.upper(), message)
        raise ValueError(message) from None


def build(config: GPT2Config):
    from gpt2.model import GPT2  # torch import deferred: config checks stay fast
    return GPT2(config)


def variant(run: Any) -> str:
    return "vanilla"  # the only attention GPT2Config offers so far


FAMILY = ModelFamily(name="gpt2", config_cls=GPT2Config, from_run_config=from_run_config,
                     build=build, variant=variant)
