"""The models the benches compare: every registered family's benchmark models
(GPT-2's attention variants, HAMT) at the configured width and depth, named
as `BENCH_VARIANTS=` names them, built only when chosen."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from lib.model import registry

if TYPE_CHECKING:
    from lib.config.run_config import RunConfig


def bench_configs(
    run: RunConfig, vocab: int, max_len: int, variants: tuple[str, ...] | None = None
) -> dict[str, tuple[Any, Any]]:
    """{name: (family, config)} of the chosen benchmark models (None: all; each
    family's bench_models: GPT-2's attention variants, HAMT) at the configured
    width and depth, with room for max_len, in the registry's order. An
    unknown name is refused with the known ones."""
    shape = model_shape(run, vocab)
    configs: dict[str, tuple[Any, Any]] = {}
    for family in registry.families():
        if family.bench_models is not None:
            for name, config in family.bench_models(run, vocab, max_len, shape).items():
                configs[name] = (family, config)
    unknown = set(variants or ()) - set(configs)
    if unknown:
        raise ValueError(
            f"unknown variants {', '.join(sorted(unknown))}; known: {', '.join(configs)}"
        )
    return {k: v for k, v in configs.items() if variants is None or k in variants}


def build_models(
    run: RunConfig, vocab: int, max_len: int, variants: tuple[str, ...] | None = None
) -> dict[str, torch.nn.Module]:
    """The chosen benchmark models (bench_configs), and only those: at GPT-2
    124M's width and 8,192 tokens each costs seconds to build and its weights'
    memory."""
    configs = bench_configs(run, vocab, max_len, variants)
    return {name: family.build(config) for name, (family, config) in configs.items()}


def model_shape(run: RunConfig, vocab: int) -> dict[str, int]:
    """n_layer, n_head, n_embd of the configured model, whichever family. A
    family without heads (HAMT's config has one) gets GPT-2's 64-wide heads
    for the attention variants."""
    cfg = registry.family(run.MODEL).from_run_config(run, vocab)
    heads = cfg.n_head if cfg.n_head > 1 else max(1, cfg.n_embd // 64)
    return {"n_layer": cfg.n_layer, "n_head": heads, "n_embd": cfg.n_embd}


def device_name(device: torch.device) -> str:
    return torch.cuda.get_device_name(device) if device.type == "cuda" else device.type
