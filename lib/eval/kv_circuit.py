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

At the end of a run (the trainer's analysis, lib/eval/rules.py) or on a
finished run (`make kv-circuit`, scripts/kv_circuit.py) the analysis leaves in
the run's folder:

  kv_circuit/summary.json     losses, channels kept per layer and head, history
  kv_circuit/heads.png        fraction of channels each layer's KV heads keep
  kv_circuit/curves.png       training loss and sparsity over the mask's steps
  kv_circuit/masks.safetensors  per layer: mask and scores (MECHINT_KV_SAVE_MASKS)

and a "kv_circuit" section in metrics.json (the summary without its history).
Every file is written atomically; figures are drawn from the summary only.
The settings it reads are lib/eval/kv_circuit_settings.py's, kept apart because
configuration checks read them without importing torch.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor, nn

from lib.atomic import write_atomic, write_json_atomic
from lib.eval.kv_circuit_settings import Settings, kept_count, progress

if TYPE_CHECKING:
    from lib.config.symbols import Eval, Speed, Train
    from lib.model.interface import LanguageModel
    from lib.speed.precision import Precision

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


def _figure(path: Path, draw) -> None:
    import matplotlib

    matplotlib.use("Agg")  # files only
    import matplotlib.pyplot as plt

    fig = draw(plt)
    try:
        write_atomic(path, lambda f: fig.savefig(f, format="png", dpi=150, bbox_inches="tight"))
    finally:
        plt.close(fig)


def heads_figure(summary: dict[str, Any], path: Path) -> None:
    """Heat map: layers down, KV heads across, the fraction of each head's channels kept."""
    layers = summary["layers"]
    grid = [[k / layer["head_width"] for k in layer["kept_per_head"]] for layer in layers]

    def draw(plt):
        fig, ax = plt.subplots(figsize=(6.4, 1.2 + 0.35 * len(layers)))
        image = ax.imshow(grid, aspect="auto", cmap="viridis", vmin=0, vmax=1)
        ax.set_xlabel("KV head")
        ax.set_ylabel("layer")
        ax.set_yticks(range(len(layers)))
        ax.set_title(
            f"K/V channels kept ({summary['channels_kept']} of {summary['channels']}); "
            f"val loss {summary['val_loss_all_channels']:.3f} -> {summary['val_loss_circuit']:.3f}",
            fontsize=10,
        )
        fig.colorbar(image, ax=ax, label="fraction kept")
        return fig

    _figure(path, draw)


def curves_figure(summary: dict[str, Any], path: Path) -> None:
    """The mask's training loss and sparsity per step, the validation losses marked."""
    steps = [h["step"] for h in summary["history"]]

    def draw(plt):
        fig, ax = plt.subplots(figsize=(6.4, 4.0))
        ax.plot(steps, [h["loss"] for h in summary["history"]], label="training loss (masked)")
        for key, label, style in (
            ("val_loss_all_channels", "val loss, all channels", "--"),
            ("val_loss_circuit", "val loss, circuit", "-."),
            ("val_loss_random_mask", "val loss, random mask", ":"),
        ):
            ax.axhline(summary[key], linestyle=style, color="grey", label=label)
        ax.set_xlabel("mask step")
        ax.set_ylabel("loss")
        right = ax.twinx()
        right.plot(steps, [h["sparsity"] for h in summary["history"]], color="tab:orange")
        right.set_ylabel("sparsity (orange)")
        right.set_ylim(0, 1)
        ax.legend(fontsize=9, loc="upper left")
        return fig

    _figure(path, draw)


def write_records(
    run_dir: Path, summary: dict[str, Any], masks: list[Tensor], scores: list[Tensor], save: bool
) -> dict[str, Any]:
    """Write the folder's files and the metrics.json section; the section."""
    from safetensors.torch import save as save_tensors

    folder = Path(run_dir) / FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    files = ["summary.json", "heads.png", "curves.png"]
    write_json_atomic(folder / "summary.json", summary)
    heads_figure(summary, folder / "heads.png")
    curves_figure(summary, folder / "curves.png")
    if save:
        tensors = {}
        for layer, mask, score in zip(summary["layers"], masks, scores):
            tensors[f"{layer['name']}.mask"] = mask.contiguous()
            tensors[f"{layer['name']}.scores"] = score.contiguous()
        data = save_tensors(tensors)
        write_atomic(folder / "masks.safetensors", lambda f: f.write(data))
        files.append("masks.safetensors")
    section = {k: v for k, v in summary.items() if k != "history"}
    section["files"] = [f"{FOLDER}/{name}" for name in files]
    _add_section(run_dir, section)
    return section


def _add_section(run_dir: Path, section: dict[str, Any]) -> None:
    path = Path(run_dir) / "metrics.json"
    metrics = json.loads(path.read_text())
    if not isinstance(metrics, dict):
        raise ValueError(f"{path}: not a JSON object; the KV circuit figures are not added")
    metrics[SECTION] = section
    write_json_atomic(path, metrics)


def _finished_normally(run_dir: Path) -> bool:
    """Completed, or stopped at TRAIN_MAX_TIME (not diverged, not by a signal)."""
    try:
        metrics = json.loads((Path(run_dir) / "metrics.json").read_text())
    except (OSError, ValueError):
        return False
    return isinstance(metrics, dict) and (
        metrics.get("status") == "completed"
        or (metrics.get("status") == "stopped" and not metrics.get("stop_signal"))
    )


def analyse_run(
    e: Eval,
    s: Speed,
    t: Train,
    model: LanguageModel,
    loaders: dict[str, Any],
    run_dir: Path,
    log: Log,
    source: str = "final weights",
) -> dict[str, Any]:
    """Analyse `model` with the run's MECHINT_KV_* settings on `loaders` ("train",
    "val") and record it in run_dir; the metrics.json section."""
    if any(type(p).__name__ == "DTensor" for p in model.parameters()):
        raise ValueError("an FSDP-sharded model cannot be analysed by one rank")
    from lib.speed.precision import resolve_precision

    settings = Settings.from_run(e)
    device = next(model.parameters()).device
    val = [loaders["val"].next_batch() for _ in range(settings.eval_iters)]
    log(
        f"kv circuit: {settings.steps} mask steps to {settings.sparsity:.0%} of K/V "
        f"channels off (MECHINT_KV), on the {source}"
    )
    summary, masks, scores = analyse(
        model,
        loaders["train"].next_batch,
        val,
        settings,
        resolve_precision(s, device),
        log,
        seed=t.TRAIN_SEED,
    )
    summary["source"] = source
    section = write_records(run_dir, summary, masks, scores, settings.save_masks)
    log(
        f"kv circuit: val loss {summary['val_loss_all_channels']:.4f} with every channel, "
        f"{summary['val_loss_circuit']:.4f} with {summary['channels_kept']} of "
        f"{summary['channels']} ({summary['val_loss_random_mask']:.4f} with as many at "
        f"random); figures in {Path(run_dir) / FOLDER}"
    )
    return section


def kv_circuit_at_end(
    e: Eval,
    s: Speed,
    t: Train,
    model: LanguageModel,
    loaders: dict[str, Any],
    run_dir: Path,
    log: Log,
) -> dict[str, Any] | None:
    """At the end of training, with MECHINT_KV: analyse the trained model on the
    run's loaders and record it; the metrics.json section, or None when not run.
    Only rank 0, only a run that finished normally. A failure never fails the
    run: it is logged and recorded as the section's "error"; `make kv-circuit`
    can analyse the finished run again."""
    import torch.distributed as dist

    from lib.run.signals import Abandoned

    if not e.MECHINT_KV or (dist.is_available() and dist.is_initialized() and dist.get_rank()):
        return None
    if not _finished_normally(run_dir):
        return None
    try:
        return analyse_run(e, s, t, model, loaders, run_dir, log)
    except (Exception, Abandoned) as err:  # Abandoned: a repeated stop signal
        section = {"error": f"{type(err).__name__}: {err}"}
        log(f"kv circuit not analysed: {section['error']}; `make kv-circuit RUN={run_dir}` retries")
        try:
            _add_section(run_dir, section)
        except (OSError, ValueError) as record_err:
            log(f"kv circuit: metrics.json not updated ({record_err})")
        return section
