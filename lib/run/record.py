"""What metrics.json says about a run beside its series (lib/run/metrics.py).

static_record() is built once at the start from the run's configuration and
what each component reports about itself (the training stack's record(), the
batch plan, the schedule, the checkpointer); describe() is its human form for
the log; end_figures() are the utilisation and memory figures each summary
adds. The trainer only hands the parts over.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from lib.run.fingerprint import fingerprint
from lib.run.metrics import mfu, peak_memory_mb

if TYPE_CHECKING:
    from lib.config.run_config import RunConfig


def static_record(
    run: RunConfig,
    run_dir: Path,
    meta: dict[str, Any],
    device_info: Any,
    world_size: int,
    *parts: dict[str, Any],
) -> dict[str, Any]:
    """The run's fixed fields, then each component's `parts` in order."""
    derived = run.derived(world_size)
    record: dict[str, Any] = {
        "run_id": run_dir.name,
        "model": run.MODEL,
        "fingerprint": fingerprint(run),  # a matrix reuses a completed twin
        "dataset": meta["dataset"],
        "tokenizer": meta["tokenizer"]["name"],
        "optimizer": run.OPTIMIZER,
        "max_iters": run.GPT2_MAX_ITERS,
        "effective_batch_size": derived["effective_batch_size"],
        "tokens_per_iter": derived["tokens_per_iter"],
        "device": device_info.kind,
        "device_name": device_info.name,
        "overrides": run.overrides,
        "world_size": world_size,
        "gradient_checkpointing": bool(run.TRAIN_GRADIENT_CHECKPOINTING),
        "epochs": round(derived["total_tokens"] / meta["train_tokens"], 2)
        if meta.get("train_tokens")
        else None,
        "data_notices": data_notices(meta, derived["total_tokens"]),
    }
    for part in parts:
        record.update(part)
    return record


# From this many passes over the training text on, a run is told it repeats it.
EPOCHS_NOTICE = 2.0


def data_notices(meta: dict[str, Any], total_tokens: int) -> list[str]:
    """What the data makes of the configuration that the user did not ask for: a
    trained vocabulary smaller than configured, and a run that reads its training
    text several times over (own data is often small)."""
    notices = []
    tokenizer = meta.get("tokenizer", {})
    got, asked = tokenizer.get("vocab_size"), tokenizer.get("requested_vocab_size")
    if got and asked and got < asked:
        notices.append(
            f"the trained BPE has {got:,} tokens, not the {asked:,} configured "
            f"(CONFIG_DATA_BPE_VOCAB_SIZE): the text offers no more merges, so the model's "
            f"vocabulary is {got:,}; a smaller DATA_BPE_VOCAB_SIZE or more text says what you get"
        )
    train = meta.get("train_tokens")
    if train and total_tokens / train >= EPOCHS_NOTICE:
        notices.append(
            f"the run reads {total_tokens:,} tokens, {total_tokens / train:.1f} epochs of its "
            f"{train:,} training tokens: it sees the same text {total_tokens / train:.1f} times, "
            f"and a model that memorises it shows a validation loss that stops falling or "
            f"rises; more text, or fewer steps (SCALE_ITERS=), if that is not what you want"
        )
    return notices


def describe(record: dict[str, Any], model_config: Any, meta: dict[str, Any]) -> list[str]:
    """The log lines that open a run: what it trains, on what, where."""
    lines = [
        f"run {record['run_id']}: {record['model']} {model_config}",
        f"parameters: {record['params']:,} ({record['params_non_embedding']:,} without "
        f"position embeddings)",
        f"data: {record['dataset']} / {record['tokenizer']}: {meta['train_tokens']:,} train "
        f"and {meta['val_tokens']:,} val tokens",
        *(f"data notice: {n}" for n in record.get("data_notices", [])),
        f"device: {record['device_name']}; precision {record['dtype']} ({record['dtype_reason']})",
    ]
    if record.get("kernels"):  # e.g. HAMT's scan backend, and why auto chose it
        lines.append(f"kernels: {record['kernels']}")
    return lines


def end_figures(
    record: dict[str, Any],
    device: torch.device,
    flops_per_token: float,
    tokens_per_sec: float,
    peak_flops: float | None,
) -> dict[str, Any]:
    """MFU (16-bit runs only: see lib/hardware/devices.py) over the tokens/s of
    all ranks, and the peak memory of this process's device."""
    if record["dtype"] == "fp32":
        peak_flops = None
    peak, measured = peak_memory_mb(device)
    # A CPU is shared: its load beside the speed and memory measured on it.
    cpu = {"load_average": round(os.getloadavg()[0], 2), "cpu_count": os.cpu_count()}
    return {
        **(cpu if device.type == "cpu" and hasattr(os, "getloadavg") else {}),
        "mfu": mfu(
            flops_per_token, tokens_per_sec, peak_flops and peak_flops * record["world_size"]
        ),
        "peak_memory_mb": peak,
        "peak_memory_measure": measured,
    }
