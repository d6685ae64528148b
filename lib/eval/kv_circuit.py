"""KV feature-circuit analysis of a trained GPT-2 (MECHINT_KV, knlp's KNLP_MECHINT).

Which key/value channels does the trained model need? The weights are frozen
and each attention layer gets a 0/1 mask over its [KV heads, head width]
channels, applied to K and V alike (gpt2/kv_probe.py hooks it in). The mask
of a step keeps the channels with the highest scores, kept = round((1 - s) n)
of a layer's n (at least one), s rising linearly from 0 at the first step to
MECHINT_KV_SPARSITY at the last; the scores learn, with Adam, what keeps the
language-model loss on training batches low. The hard mask is used forward;
the gradient reaching a score is that of sigmoid(score / T), T following
MECHINT_KV_TEMP_SCHEDULE (a straight-through estimate, as in continuous
sparsification, Savarese et al. 2020). knlp's pass (lib/mechint/kv_circuit.py
at 041ec5f2) learns the same kind of mask with the same knobs, but its script
feeds it random tokens and its target sparsity never acts on the mask; this
one runs on the run's own data and reaches its target.

The model runs in eval mode (no dropout): the circuit of the model as it
predicts. The validation loss with every channel and with the final mask,
over the same MECHINT_KV_EVAL_ITERS batches, says how faithful the circuit is.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor, nn

from lib.eval.kv_circuit_settings import Settings, kept_count, progress

if TYPE_CHECKING:
    from lib.hardware.precision import Precision

Log = Callable[[str], None]
Batches = Callable[[], tuple[Tensor, Tensor]]
FOLDER = "kv_circuit"  # in the run's folder
SECTION = "kv_circuit"  # in its metrics.json


def hard_mask(scores: Tensor, kept: int) -> Tensor:
    """1 for the `kept` highest scores (among equal ones, those torch.topk picks), 0 elsewhere."""
    flat = scores.detach().flatten()
    mask = torch.zeros_like(flat)
    mask[torch.topk(flat, kept, sorted=False).indices] = 1.0
    return mask.view_as(scores)


class Masks(nn.Module):
    """One score per KV head and channel of every attention layer, and the masks
    the layers apply now (`active`: None passes K and V through)."""

    def __init__(self, sites: list[tuple[str, int, int]], device: torch.device):
        super().__init__()
        self.names = [name for name, _, _ in sites]
        self.scores = nn.ParameterList(
            nn.Parameter(torch.zeros(heads, width, device=device)) for _, heads, width in sites
        )
        self.active: list[Tensor] | None = None

    def learning(self, sparsity: float, temperature: float) -> list[Tensor]:
        """Each layer's mask for a learning step: hard forward, sigmoid(score / T) backward."""
        out = []
        for scores in self.scores:
            soft = torch.sigmoid(scores / temperature)
            hard = hard_mask(scores, kept_count(scores.numel(), sparsity))
            out.append(hard + soft - soft.detach())
        return out

    def hard(self, sparsity: float) -> list[Tensor]:
        return [hard_mask(s, kept_count(s.numel(), sparsity)) for s in self.scores]

    def random(self, sparsity: float, seed: int) -> list[Tensor]:
        """Masks keeping as many channels per layer, chosen at random: the baseline
        a learned circuit must beat."""
        gen = torch.Generator().manual_seed(seed)
        return [
            hard_mask(
                torch.rand(s.shape, generator=gen).to(s.device), kept_count(s.numel(), sparsity)
            )
            for s in self.scores
        ]

    def transforms(self) -> list[Callable[[Tensor, Tensor], tuple[Tensor, Tensor]]]:
        def layer(i: int) -> Callable[[Tensor, Tensor], tuple[Tensor, Tensor]]:
            def transform(k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
                if self.active is None:
                    return k, v
                m = self.active[i].to(k.dtype)[None, :, None, :]  # [1, H_kv, 1, D]
                return k * m, v * m

            return transform

        return [layer(i) for i in range(len(self.scores))]


@torch.no_grad()
def mean_loss(
    model: nn.Module, batches: list[tuple[Tensor, Tensor]], precision: Precision
) -> float:
    losses = []
    for x, y in batches:
        with precision.autocast():
            _, loss = model(x, y)
        assert loss is not None
        losses.append(loss.float().item())
    return sum(losses) / len(losses)


@contextlib.contextmanager
def frozen(model: nn.Module) -> Iterator[None]:
    """The model in eval mode with no parameter requiring a gradient; as it was after."""
    mode, wants = model.training, [p.requires_grad for p in model.parameters()]
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    try:
        yield
    finally:
        for p, want in zip(model.parameters(), wants):
            p.requires_grad_(want)
        model.train(mode)


def analyse(
    model: nn.Module,
    train: Batches,
    val: list[tuple[Tensor, Tensor]],
    settings: Settings,
    precision: Precision,
    log: Log = print,
    seed: int = 0,
) -> tuple[dict[str, Any], list[Tensor], list[Tensor]]:
    """Learn the circuit (module docstring): (summary, final masks, final scores)."""
    from gpt2.kv_probe import kv_sites, transformed_kv

    sites = kv_sites(model)
    if not sites:
        raise ValueError(
            "the model has no attention layer with per-head keys and values (the MLA "
            "forms cache a latent): there are no K/V channels to mask"
        )
    device = next(model.parameters()).device
    masks = Masks(sites, device)
    optimizer = torch.optim.Adam(masks.parameters(), lr=settings.lr)
    scaler = precision.grad_scaler()
    history: list[dict[str, float]] = []
    started = time.monotonic()
    with frozen(model), transformed_kv(model, masks.transforms()):
        dense = mean_loss(model, val, precision)
        for step in range(settings.steps):
            at = progress(step, settings.steps)
            sparsity, temperature = at * settings.sparsity, settings.temperature.at(at)
            masks.active = masks.learning(sparsity, temperature)
            x, y = train()
            with precision.autocast():
                _, loss = model(x, y)
            assert loss is not None
            optimizer.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
            kept = sum(int(m.detach().sum().item()) for m in masks.active)
            history.append(
                {
                    "step": step + 1,
                    "loss": round(loss.float().item(), 6),
                    "sparsity": round(1 - kept / sum(s.numel() for s in masks.scores), 6),
                    "temperature": round(temperature, 6),
                }
            )
            if (step + 1) % max(1, settings.steps // 10) == 0 or step + 1 == settings.steps:
                log(
                    f"kv circuit: step {step + 1}/{settings.steps} | loss {loss.item():.4f} | "
                    f"sparsity {history[-1]['sparsity']:.1%} | T {temperature:.3f}"
                )
        final = masks.hard(settings.sparsity)
        masks.active = final
        circuit = mean_loss(model, val, precision)
        masks.active = masks.random(settings.sparsity, seed)
        random = mean_loss(model, val, precision)
        masks.active = None
    kept_total = sum(int(m.sum().item()) for m in final)
    channels = sum(m.numel() for m in final)
    summary = {
        "settings": {
            "sparsity": settings.sparsity,
            "steps": settings.steps,
            "lr": settings.lr,
            "temperature": f"{settings.temperature.kind}:{settings.temperature.start:g}"
            + (f":{settings.temperature.end:g}" if settings.temperature.kind != "constant" else ""),
            "eval_batches": len(val),
        },
        "val_loss_all_channels": round(dense, 6),
        "val_loss_circuit": round(circuit, 6),
        "val_loss_random_mask": round(random, 6),
        "channels": channels,
        "channels_kept": kept_total,
        "sparsity": round(1 - kept_total / channels, 6),
        "layers": [
            {
                "name": name,
                "kv_heads": heads,
                "head_width": width,
                "kept": int(m.sum().item()),
                "kept_per_head": [int(v) for v in m.sum(dim=1).tolist()],
            }
            for (name, heads, width), m in zip(sites, final)
        ],
        "seconds": round(time.monotonic() - started, 3),
        "history": history,
    }
    return summary, [m.cpu() for m in final], [s.detach().cpu() for s in masks.scores]
