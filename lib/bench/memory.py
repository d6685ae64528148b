"""The memory estimate against the measured peak: a few real training steps.

`measure_peak(run, steps)` builds the configured model, optimizer, pruner and
step with the trainer's own build_training (lib/train/build.py), runs `steps`
optimizer steps on random tokens (no dataset needed) and returns the peak
bytes of tensors allocated:

* CUDA: torch.cuda.max_memory_allocated, from before the model is built.
* CPU: the PyTorch profiler's allocation record (profile_memory=True): the
  running sum of every tensor allocation and free during the same span,
  whose maximum is the peak of live tensor bytes. Process RSS would add
  the interpreter, libraries and allocator caching.

`make estimate` with --validate (scripts/estimate.py) runs the reference cases
on the device present (GPU_CASES on CUDA, CPU_CASES on the CPU), compares
lib/estimate's estimate_memory with the measured peak and reports the error in
percent, (estimate - measured) / measured. It lives here, above lib/train,
because it runs the training stack; lib/estimate itself only computes.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from lib.config.run_config import RunConfig


def cpu_peak_bytes(fn: Callable[[], Any]) -> int:
    """Peak live tensor bytes allocated on the CPU while fn runs."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    events = [
        e
        for e in prof.profiler.kineto_results.events()
        if e.name() == "[memory]" and str(e.device_type()).endswith("CPU")
    ]
    live = peak = 0
    for event in sorted(events, key=lambda e: e.start_ns()):
        live += event.nbytes()
        peak = max(peak, live)
    return peak


def cuda_peak_bytes(fn: Callable[[], Any], device: torch.device) -> int:
    gc.collect()
    torch.cuda.empty_cache()
    torch.cuda.synchronize(device)
    start = torch.cuda.memory_allocated(device)
    torch.cuda.reset_peak_memory_stats(device)
    fn()
    torch.cuda.synchronize(device)
    return torch.cuda.max_memory_allocated(device) - start


def train_steps(run: RunConfig, device: torch.device, vocab_size: int, steps: int) -> None:
    """Build what the trainer builds (lib/train/build.py) and run `steps` optimizer steps."""
    from lib.train.build import build_training

    training = build_training(run, device, vocab_size)
    cfg, step = training.config, training.step
    generator = torch.Generator().manual_seed(0)

    def batch() -> tuple[torch.Tensor, torch.Tensor]:
        tokens = torch.randint(
            cfg.vocab_size, (run.BATCH_SIZE, cfg.block_size + 1), generator=generator
        )
        return tokens[:, :-1].to(device), tokens[:, 1:].to(device)

    for i in range(steps):
        step(batch, 1e-4, i + 1)


def measure_peak(
    run: RunConfig, vocab_size: int, steps: int = 3, device: torch.device | None = None
) -> int:
    """Peak tensor bytes of `steps` training steps of `run` (module docstring)."""
    from lib.speed.precision import resolve_device

    device = device or resolve_device(run.DEVICE)
    work = lambda: train_steps(run, device, vocab_size, steps)  # noqa: E731
    if device.type == "cuda":
        return cuda_peak_bytes(work, device)
    return cpu_peak_bytes(work)


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
    from lib.data.vocab import configured_vocab
    from lib.estimate.memory import GIB, MIB, estimate_memory

    rows = []
    for name, settings in cases.items():
        run = make_run(settings)
        size = vocab or configured_vocab(run.data)
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
