"""Estimate against measurement: a few real training steps per configuration.

`scripts/estimate.py --validate` runs VALIDATION_CASES on the device present
(the GPU list on CUDA, small models on the CPU), compares estimate_memory
with the measured peak (lib/estimate/measure.py) and reports the error in
percent, (estimate - measured) / measured.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

GPT2_124M = {
    "GPT2_MODEL_124M": "y",
    "GPT2_BLOCK_SIZE": "1024",
    "GPT2_PAD_VOCAB": "y",
    "MIXED_PRECISION_DTYPE_BF16": "y",
    "DEVICE_CUDA": "y",
}
HAMT_124M_SHAPE = {
    "MODEL_HAMT": "y",
    "HAMT_N_LAYER": "12",
    "HAMT_N_EMBD": "768",
    "GPT2_BLOCK_SIZE": "1024",
    "MIXED_PRECISION_DTYPE_BF16": "y",
    "DEVICE_CUDA": "y",
}
GPU_CASES: dict[str, dict[str, str]] = {
    "gpt2-124m b8 bf16": {**GPT2_124M, "BATCH_SIZE": "8"},
    "gpt2-124m b16 bf16": {**GPT2_124M, "BATCH_SIZE": "16"},
    "gpt2-124m b16 bf16 checkpointing": {
        **GPT2_124M,
        "BATCH_SIZE": "16",
        "TRAIN_GRADIENT_CHECKPOINTING": "y",
    },
    "gpt2-124m b8 bf16 accumulation 4": {
        **GPT2_124M,
        "BATCH_SIZE": "8",
        "GPT2_GRADIENT_ACCUMULATION": "4",
    },
    "gpt2-124m b8 fp32": {
        **{k: v for k, v in GPT2_124M.items() if "PRECISION" not in k},
        "BATCH_SIZE": "8",
        "MIXED_PRECISION": "n",
    },
    "gpt2-124m b32 bf16": {**GPT2_124M, "BATCH_SIZE": "32"},
    "gpt2-124m b8 mla": {**GPT2_124M, "BATCH_SIZE": "8", "GPT2_ATTENTION_MLA": "y"},
    "gpt2-124m b8 adamwspam": {**GPT2_124M, "BATCH_SIZE": "8", "OPTIMIZER_ADAMWSPAM": "y"},
    "gpt2-350m b8 bf16": {
        **{k: v for k, v in GPT2_124M.items() if k != "GPT2_MODEL_124M"},
        "GPT2_MODEL_350M": "y",
        "BATCH_SIZE": "8",
    },
    "hamt 12x768 b8 bf16": {**HAMT_124M_SHAPE, "BATCH_SIZE": "8"},
}
TINY = {
    "GPT2_N_LAYER": "2",
    "GPT2_N_HEAD": "4",
    "GPT2_N_EMBD": "64",
    "GPT2_BLOCK_SIZE": "128",
    "BATCH_SIZE": "8",
    "DEVICE_CPU": "y",
    "DATA_TOKENIZER_CHAR": "y",
}
CPU_CASES: dict[str, dict[str, str]] = {
    "gpt2 2x64 b8 fp32": dict(TINY),
    "gpt2 2x64 b8 bf16": {**TINY, "MIXED_PRECISION_DTYPE_BF16": "y"},
    "gpt2 6x64 b8 checkpointing": {
        **TINY,
        "GPT2_N_LAYER": "6",
        "TRAIN_GRADIENT_CHECKPOINTING": "y",
    },
    "gpt2 2x64 b8 mla": {**TINY, "GPT2_ATTENTION_MLA": "y"},
    "hamt 2x64 b8 bf16": {
        "MODEL_HAMT": "y",
        "HAMT_N_LAYER": "2",
        "HAMT_N_EMBD": "64",
        "GPT2_BLOCK_SIZE": "128",
        "BATCH_SIZE": "8",
        "DEVICE_CPU": "y",
        "DATA_TOKENIZER_CHAR": "y",
        "MIXED_PRECISION_DTYPE_BF16": "y",
    },
}
CPU_VOCAB = 512  # the CPU cases use a char tokenizer; this stands in for its vocabulary


def validate(
    make_run: Callable[[dict[str, str]], Any],
    cases: dict[str, dict[str, str]],
    steps: int = 3,
    vocab: int | None = None,
    log: Callable[[str], None] = print,
) -> list[dict[str, Any]]:
    """Estimate and measure every case; one dict per case."""
    import torch

    from lib.data.vocab import configured_vocab
    from lib.estimate.measure import measure_peak
    from lib.estimate.memory import GIB, MIB, estimate_memory

    rows = []
    for name, settings in cases.items():
        run = make_run(settings)
        size = vocab or configured_vocab(run)
        est = estimate_memory(run, size)
        started = time.perf_counter()
        try:
            measured = measure_peak(run, size, steps)
        except torch.OutOfMemoryError as err:
            log(f"{name}: out of memory ({err}); estimate {est.total_bytes / GIB:.2f} GiB")
            rows.append({"case": name, "error": "out of memory", **est.as_dict()})
            continue
        error = 100 * (est.total_bytes - measured) / measured
        rows.append(
            {
                "case": name,
                "settings": settings,
                "measured_bytes": measured,
                "error_percent": error,
                "seconds": time.perf_counter() - started,
                **est.as_dict(),
            }
        )
        log(
            f"{name:<34} estimate {est.total_bytes / MIB:9.1f} MiB  measured "
            f"{measured / MIB:9.1f} MiB  error {error:+6.1f} %  (peak: {est.phase})"
        )
    return rows
