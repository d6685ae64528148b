"""What each stage measures on a GPU, and the tiny shapes of the CPU mode.

On CUDA the shapes are the issue's (GPT-2 124M, block 1024, bf16, compile);
with DEVICE=cpu every stage runs the same code path on a 2-layer, 64-wide
model of block 64 in a few seconds, so a typo costs no GPU minute.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]
DEFCONFIGS = ROOT / "defconfigs"
BASELINE = "gpt2-vanilla-baseline"  # GPT-2 124M, block 1024, bf16, compile
REFERENCE = "gpt2-spam-magnitude-50"  # the field's reference run
HAMT = "hamt-small"
PUBLISHED_REFERENCE_GIB = 25.3  # the published run of REFERENCE (AMD W7900, compile)
# fp32 and a character vocabulary: bf16 autocast and a 50,257-token head are
# what makes a CPU slow, and neither changes the code path.
TINY = "DATA_TOKENIZER_CHAR=y MIXED_PRECISION=n GPT2_BLOCK_SIZE=64"
TINY_GPT2 = f"GPT2_MODEL_CUSTOM=y GPT2_N_LAYER=2 GPT2_N_HEAD=2 GPT2_N_EMBD=64 {TINY}"
TINY_HAMT = f"HAMT_N_LAYER=2 HAMT_N_EMBD=64 {TINY}"
# The tiny trained runs (stage f) are a few steps: no learning-rate warmup.
TINY_RUN = "GPT2_WARMUP_STEPS=0"


def overrides(
    device: str,
    batch: int,
    accumulation: int,
    compile: bool,
    tiny: str = TINY_GPT2,
    extra: str = "",
) -> list[str]:
    """NAME=VALUE words for load_run_config: the device, the batch shape and,
    on a CPU, the tiny model instead of the defconfig's size."""
    words = [
        f"DEVICE={device}",
        f"BATCH_SIZE={batch}",
        f"GRAD_ACCUM={accumulation}",
        f"COMPILE={'y' if compile and device == 'cuda' else 'n'}",
    ]
    symbols = " ".join(part for part in (tiny if device == "cpu" else "", extra) if part)
    return words + ([f"SET={symbols}"] if symbols else [])


GPU: dict[str, Any] = {
    "micro_batches": (32,),
    # b's options at "options_batch", each one short run of ours alone (MFU goal).
    "options_batch": 32,
    "options_steps": 5,
    "bench_steps": 10,
    "bench_rounds": 2,
    "bench_warmup": 3,
    "reference_steps": 3,
    "optim_shapes": ((16, 1, 10), (32, 4, 4)),  # batch, accumulation, timed steps
    # The compiled AdamWSPAM step too (bench-optim times it under OPTIMIZER_IMPL=fused).
    "optim_symbols": "OPTIMIZER_IMPL_FUSED=y",
    "optim_rounds": 2,
    "seqlen_lengths": (2048, 8192),
    "seqlen_tokens": 65536,
    "seqlen_steps": 3,
    "torch_scan_lengths": (),  # HAMT's torch scan: out of e's 180 s on a GPU
    "speed_batch": 16,
    "speed_steps": 5,
    "tiny_iters": 50,
    "tiny_run": TINY_RUN,
    "matrix_runs": 4,
    "matrix_iters": 200,
}
CPU: dict[str, Any] = {
    "micro_batches": (2,),
    "options_batch": 2,
    "options_steps": 1,
    "bench_steps": 1,
    "bench_rounds": 1,
    "bench_warmup": 1,
    "reference_steps": 1,
    "optim_shapes": ((2, 1, 1),),
    "optim_symbols": "",
    "optim_rounds": 1,
    "seqlen_lengths": (32, 64),
    "seqlen_tokens": 128,
    "seqlen_steps": 1,
    "torch_scan_lengths": (32,),
    "speed_batch": 2,
    "speed_steps": 1,
    "tiny_iters": 2,
    # No BPE to train and 2 validation batches: the data preparation and the final
    # evaluation were most of the CPU's stage f, and neither is its code path.
    "tiny_run": f"{TINY_RUN} DATA_TOKENIZER_CHAR=y TRAIN_EVAL_ITERS=2",
    "matrix_runs": 1,
    "matrix_iters": 2,
}
# Stage b: what could reach 50 % MFU, each one short run of the trainer's
# step: (micro-batch, or None for options_batch; SET words on the baseline).
# The first word names the choice an option belongs to: the best of each
# choice that beats the plain setting then runs combined. max-autotune last:
# cold, it autotunes longest. The CPU runs those it can (cuDNN, liger and
# max-autotune need CUDA).
MFU_OPTIONS_GPU: dict[str, tuple[int | None, str]] = {
    "sdpa cudnn": (None, "SDPA_BACKEND_CUDNN=y"),
    "sdpa flash": (None, "SDPA_BACKEND_FLASH=y"),
    "loss chunked": (None, "TRAIN_LOSS_IMPL_CHUNKED=y"),
    "loss liger": (None, "TRAIN_LOSS_IMPL_LIGER=y"),
    "micro-batch 64": (64, ""),
    "compile max-autotune-no-cudagraphs": (None, "COMPILE_MODE_MAX_AUTOTUNE_NO_CUDAGRAPHS=y"),
}
MFU_OPTIONS_CPU: dict[str, tuple[int | None, str]] = {
    "sdpa flash": (None, "SDPA_BACKEND_FLASH=y"),
    "loss chunked": (None, "TRAIN_LOSS_IMPL_CHUNKED=y"),
    "micro-batch 4": (4, ""),
}
# Stage f: the other speed options, one short run each.
SPEED_OPTIONS_GPU = {
    "loss plain": "TRAIN_LOSS_IMPL_PLAIN=y",
    "compile default": "COMPILE_MODE_DEFAULT=y",
    "float8 rowwise": "TRAIN_FLOAT8_ROWWISE=y",
}
SPEED_OPTIONS_CPU = {
    "loss plain": "TRAIN_LOSS_IMPL_PLAIN=y",
}


def describe_shapes() -> str:
    """The CPU mode's shapes, in words."""
    return (
        f"GPT-2 {TINY_GPT2}; HAMT {TINY_HAMT}; seqlen lengths {CPU['seqlen_lengths']}; "
        f"micro-batch {CPU['micro_batches']}"
    )


def for_device(device: str) -> dict[str, Any]:
    return GPU if device == "cuda" else CPU
