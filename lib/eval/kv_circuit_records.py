"""The KV circuit analysis (lib/eval/kv_circuit.py) at the end of a run, and
what it leaves in the run's folder:

  kv_circuit/summary.json     losses, channels kept per layer and head, history
  kv_circuit/heads.png        fraction of channels each layer's KV heads keep
  kv_circuit/curves.png       training loss and sparsity over the mask's steps
  kv_circuit/masks.safetensors  per layer: mask and scores (MECHINT_KV_SAVE_MASKS)

and a "kv_circuit" section in metrics.json (the summary without its history).
Every file is written atomically; figures are drawn from the summary only.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from torch import Tensor

from lib.atomic import write_atomic, write_json_atomic
from lib.eval.kv_circuit import FOLDER, SECTION, Log, analyse
from lib.eval.kv_circuit_settings import Settings

if TYPE_CHECKING:
    from lib.config.run_config import RunConfig
    from lib.model.interface import LanguageModel


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
    run: RunConfig,
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
    from lib.hardware.precision import resolve_precision

    settings = Settings.from_run(run)
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
        resolve_precision(run, device),
        log,
        seed=run.TRAIN_SEED,
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
    run: RunConfig, model: LanguageModel, loaders: dict[str, Any], run_dir: Path, log: Log
) -> dict[str, Any] | None:
    """At the end of training, with MECHINT_KV: analyse the trained model on the
    run's loaders and record it; the metrics.json section, or None when not run.
    Only rank 0, only a run that finished normally. A failure never fails the
    run: it is logged and recorded as the section's "error"; `make kv-circuit`
    can analyse the finished run again."""
    import torch.distributed as dist

    from lib.run.signals import Abandoned

    if not run.MECHINT_KV or (dist.is_available() and dist.is_initialized() and dist.get_rank()):
        return None
    if not _finished_normally(run_dir):
        return None
    try:
        return analyse_run(run, model, loaders, run_dir, log)
    except (Exception, Abandoned) as err:  # Abandoned: a repeated stop signal
        section = {"error": f"{type(err).__name__}: {err}"}
        log(f"kv circuit not analysed: {section['error']}; `make kv-circuit RUN={run_dir}` retries")
        try:
            _add_section(run_dir, section)
        except (OSError, ValueError) as record_err:
            log(f"kv circuit: metrics.json not updated ({record_err})")
        return section
