"""`make bench-precision`: how far mixed precision moves each model's gradient.

For each benchmark model (lib/bench/models.py: GPT-2's attention
variants, HAMT) at the configured width, depth and context, and each seed: one
batch of random tokens, the loss and the whole parameter gradient in float32 (full
float32 matmuls, no TF32), then the same under bf16 autocast, from the same
weights and the same random draws. The record holds the relative change of
the gradient, ||g_bf16 - g_fp32|| / ||g_fp32||, the parameter whose own
gradient moved most, and the change of the loss.

A vanilla transformer's gradient moves by a few tenths of a percent under
bf16; a model whose gradient moves far more trains on a different gradient
than its float32 recurrence says (HAMT's unit keys: HAMT_KEY_EPS).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, is_dataclass
from typing import Any

import torch

from lib.bench.models import bench_configs, device_name, model_shape
from lib.config.run_config import RunConfig
from lib.model import registry
from lib.speed.precision import resolve_device

DEFAULT_VARIANTS = ("vanilla", "hamt")


@contextmanager
def _highest_float32_matmuls() -> Iterator[None]:
    """Full float32 matmuls for the reference pass, whatever the process set."""
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest")
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(before)


def _loss_and_grads(
    model: torch.nn.Module, idx: torch.Tensor, seed: int, autocast: bool
) -> tuple[float, dict[str, torch.Tensor]]:
    model.zero_grad(set_to_none=True)
    torch.manual_seed(seed)  # a model's own draws (HAMT's retrieval lags): the same in both
    with torch.autocast(idx.device.type, dtype=torch.bfloat16, enabled=autocast):
        _, loss = model(idx, idx)
    loss.backward()
    grads = {
        n: p.grad.detach().float().clone()
        for n, p in model.named_parameters()
        if p.grad is not None
    }
    return float(loss.detach()), grads


def gradient_change(model: torch.nn.Module, idx: torch.Tensor, seed: int) -> dict[str, Any]:
    """The loss and gradient of one batch in float32 against bf16 autocast."""
    with _highest_float32_matmuls():
        loss32, ref = _loss_and_grads(model, idx, seed, autocast=False)
        loss16, low = _loss_and_grads(model, idx, seed, autocast=True)
    diff = sum(float((low[n] - g).square().sum()) for n, g in ref.items()) ** 0.5
    norm = sum(float(g.square().sum()) for g in ref.values()) ** 0.5
    per_param = {
        n: float((low[n] - g).norm() / g.norm()) for n, g in ref.items() if float(g.norm()) > 0
    }
    worst = max(per_param, key=per_param.__getitem__)
    return {
        "grad_change": diff / norm,
        "worst_param": worst,
        "worst_param_change": per_param[worst],
        "loss_fp32": loss32,
        "loss_change": loss16 - loss32,
    }


def _config(model: torch.nn.Module) -> dict[str, Any]:
    config = getattr(model, "config", None)
    return asdict(config) if is_dataclass(config) and not isinstance(config, type) else {}


def run_precision_bench(
    run: RunConfig,
    vocab: int,
    seq_len: int | None = None,
    batch: int = 4,
    seeds: tuple[int, ...] = (0, 1, 2),
    variants: tuple[str, ...] | None = None,
) -> dict[str, Any]:
    """Every chosen variant (default: vanilla and HAMT) at each seed: a model
    initialised from that seed, a batch of random tokens drawn from it, as
    long as the configured model's context (seq_len: another length)."""
    device = resolve_device(run.DEVICE)
    seq_len = seq_len or registry.family(run.MODEL).from_run_config(run, vocab).block_size
    chosen = variants or DEFAULT_VARIANTS
    known = bench_configs(run, vocab, seq_len, chosen)
    rows, configs, params = [], {}, {}
    for seed in seeds:
        gen = torch.Generator().manual_seed(seed)
        idx = torch.randint(vocab, (batch, seq_len), generator=gen).to(device)
        for variant in chosen:
            # each model from its seed alone: the same weights whatever else is chosen
            torch.manual_seed(seed)
            family, config = known[variant]
            model = family.build(config).to(device)
            configs[variant] = _config(model)
            params[variant] = sum(p.numel() for p in model.parameters())
            rows.append({"variant": variant, "seed": seed, **gradient_change(model, idx, seed)})
    return {
        "device": str(device),
        "device_name": device_name(device),
        "vocab_size": vocab,
        **model_shape(run, vocab),
        "seq_len": seq_len,
        "batch_size": batch,
        "seeds": list(seeds),
        "variants": list(chosen),
        "params": params,
        "model_configs": configs,
        "torch": torch.__version__,
        "rows": rows,
    }


def describe(result: dict[str, Any]) -> str:
    """The record as `make bench-precision` prints it."""
    lines = [
        f"{result['n_layer']} layers x {result['n_embd']} wide, batch {result['batch_size']} x "
        f"{result['seq_len']} tokens, {result['device_name']}, seeds "
        + " ".join(map(str, result["seeds"])),
        "bf16 autocast against float32: the whole gradient's relative change, the parameter "
        "whose gradient moved most, the loss's change",
    ]
    for r in result["rows"]:
        lines.append(
            f"  {r['variant']:<10} seed {r['seed']}: gradient {100 * r['grad_change']:7.3f} %, "
            f"worst {r['worst_param']} {100 * r['worst_param_change']:.2f} %, "
            f"loss {r['loss_change']:+.2e}"
        )
    return "\n".join(lines)
